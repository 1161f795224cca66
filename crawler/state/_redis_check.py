"""What is read from Redis is checked before it is used: types, sizes and shapes.

Anyone who can write to Redis can write anything under a crawl's keys (issue 27, item 3): a
list where a hash belongs, a counter that is not a number, settings that are not JSON, a value
of hundreds of megabytes. Each of those is a ``StateError`` naming the key (the CLI exits 2 on
it), never a traceback, and a value over its bound is refused by a script inside Redis before
it is sent, so that a worker never holds it.

Two scripts (in ``crawler.state._redis_scripts.SCRIPTS``): ``check`` runs when a worker opens
the crawl (and again when Redis refuses a call, to say why): the type of every fixed key, the
format of the counters, the size of the small values; ``read`` reads values with their type and
size checked in the same atomic step (status, counts, counters, settings, robots.txt). The
scripts name a bad key in an error reply ``BADSTATE <length> <key><what>`` (the key escaped to
printable ASCII) that `bad_state` turns into the message. Malformed data found by the other
scripts (a lease record or a queued item they cannot split) uses the same reply.

The bounds (``MAX_*`` below) are far above what a real crawl stores: its own writes never
reach them.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from typing import Any

from crawler.state.base import StateError, StoredRobots

__all__ = [
    "BAD_STATE_LUA",
    "CHECK",
    "MAX_FIELDS",
    "MAX_ITEM",
    "MAX_ROBOTS_VALUE",
    "MAX_SETTINGS",
    "MAX_SMALL",
    "READ",
    "as_int",
    "bad_state",
    "expected_type",
    "json_object",
    "read_args",
    "refused_version",
    "robots_record",
    "text_of",
]

#: Bytes of the crawl's settings (JSON; the seeds are in it): 64 MiB, some 500,000 seeds.
MAX_SETTINGS = 64 << 20
#: Bytes of a stored robots.txt (the fetch keeps at most 500 KiB of the body) and its header.
MAX_ROBOTS_VALUE = 1 << 20
#: Bytes of one queued request, lease record or origin name (a request holds its URL and its
#: referrer's, each at most ``max_url_length``: 2,048 characters by default).
MAX_ITEM = 4 << 20
#: Bytes of a small value: the version, the fingerprint key, a time, a counter, a field name.
MAX_SMALL = 256
#: Fields of a hash of counters (counts, failures by kind, named counters, rate buckets).
MAX_FIELDS = 4096

# The Lua helper every script shares: an error reply naming a key, the key escaped so that
# the reply is printable ASCII and its length (in the reply) is its length in characters.
BAD_STATE_LUA = r"""
local function bad(key, what)
  local named = {['\t'] = '\\t', ['\n'] = '\\n', ['\r'] = '\\r'}
  local shown = string.gsub(key, '[^%w%p ]', function(c)
    return named[c] or string.format('\\x%02x', string.byte(c))
  end)
  error({err = 'BADSTATE ' .. #shown .. ' ' .. shown .. what})
end

local function ktype(key, want)
  local t = redis.call('TYPE', key).ok
  if t == 'none' then return false end
  if t ~= want then bad(key, ' is a ' .. t .. ', where the crawl keeps a ' .. want) end
  return true
end
"""

# KEYS[1] the crawl's prefix; ARGV: MAX_SMALL, MAX_FIELDS, MAX_SETTINGS -> 1
CHECK = (
    BAD_STATE_LUA
    + r"""
local P = KEYS[1]
local SMALL, FIELDS, SETTINGS = tonumber(ARGV[1]), tonumber(ARGV[2]), tonumber(ARGV[3])

local function sized(key, max)
  if not ktype(key, 'string') then return nil end
  local n = redis.call('STRLEN', key)
  if n > max then bad(key, ' holds ' .. n .. ' bytes, more than the ' .. max .. ' allowed') end
  return n
end

local function integer(key)
  if sized(key, SMALL) and not string.match(redis.call('GET', key), '^%-?%d+$') then
    bad(key, ' is not an integer')
  end
end

-- a hash of at most FIELDS short fields whose values match `form`
local function hash(key, form, what)
  if not ktype(key, 'hash') then return end
  local n = redis.call('HLEN', key)
  if n > FIELDS then bad(key, ' has ' .. n .. ' fields, more than the ' .. FIELDS .. ' allowed') end
  local all = redis.call('HGETALL', key)
  for i = 1, #all, 2 do
    if #all[i] > SMALL or #all[i + 1] > SMALL or not string.match(all[i + 1], form) then
      bad(key, ' holds a field that is not ' .. what)
    end
  end
end

sized(P .. 'v', SMALL)
sized(P .. 'fpkey', SMALL)
sized(P .. 'created', SMALL)
sized(P .. 'settings', SETTINGS)
integer(P .. 'a')
hash(P .. 'cfg', '^[%d%.eE%+%-]+$', 'a number')
for _, k in ipairs({'k', 'rate'}) do hash(P .. k, '^%-?%d+$', 'an integer') end
for k, t in pairs({kw = 'hash', used = 'set', ws = 'hash', own = 'hash', cx = 'zset',
                   workers = 'zset'}) do
  ktype(P .. k, t)
end
return 1
"""
)

# KEYS[1] the crawl's prefix; ARGV: triples (key suffix, how, bound) -> one value each:
# how "s": a string of at most `bound` bytes (nil if none); "h": a hash of at most `bound`
# fields, each name and value at most MAX_SMALL bytes (a flat list); "l": a hash's field
# count; "w": workers whose heartbeat has not lapsed; "t": the server's time ("s.us")
READ = (
    BAD_STATE_LUA
    + f"local SMALL = {MAX_SMALL}\n"
    + r"""
local P = KEYS[1]
local out = {}
for i = 1, #ARGV, 3 do
  local key, how, max = P .. ARGV[i], ARGV[i + 1], tonumber(ARGV[i + 2])
  local v = false
  if how == 's' then
    if ktype(key, 'string') then
      local n = redis.call('STRLEN', key)
      if n > max then bad(key, ' holds ' .. n .. ' bytes, more than the ' .. max .. ' allowed') end
      v = redis.call('GET', key)
    end
  elseif how == 'h' then
    v = {}
    if ktype(key, 'hash') then
      local n = redis.call('HLEN', key)
      if n > max then bad(key, ' has ' .. n .. ' fields, more than the ' .. max .. ' allowed') end
      v = redis.call('HGETALL', key)
      for j = 1, #v do
        if #v[j] > SMALL then bad(key, ' holds a field or value over ' .. SMALL .. ' bytes') end
      end
    end
  elseif how == 'l' then
    v = 0
    if ktype(key, 'hash') then v = redis.call('HLEN', key) end
  elseif how == 'w' then
    v = 0
    if ktype(key, 'zset') then
      local t = redis.call('TIME')
      v = redis.call('ZCOUNT', key, t[1] .. '.' .. string.format('%06d', tonumber(t[2])), '+inf')
    end
  elseif how == 't' then
    local t = redis.call('TIME')
    v = t[1] .. '.' .. string.format('%06d', tonumber(t[2]))
  end
  out[#out + 1] = v
end
return out
"""
)

_BAD = re.compile(r"BADSTATE (\d+) ")
# A key's suffix (after the crawl's prefix) -> the type the crawl keeps there.
_FIXED_TYPES = {
    "v": "string", "fpkey": "string", "created": "string", "cfg": "hash",
    "k": "hash", "a": "string", "rate": "hash", "ws": "hash", "kw": "hash", "used": "set",
    "own": "hash", "cx": "zset", "workers": "zset", "settings": "string", "c": "hash",
}  # fmt: skip
_PREFIX_TYPES = (("in:", "stream"), ("r:", "string"))


def expected_type(suffix: str) -> str | None:
    """The Redis type the crawl keeps at a key (``suffix``: the part after its prefix)."""
    found = _FIXED_TYPES.get(suffix)
    if found is not None:
        return found
    for head, kind in _PREFIX_TYPES:
        if suffix.startswith(head):
            return kind
    return None


def bad_state(where: str, message: str) -> StateError | None:
    """The StateError of a script's ``BADSTATE`` error reply (None: another error)."""
    m = _BAD.search(message)
    if m is None:
        return None
    n = int(m.group(1))
    key = message[m.end() : m.end() + n]
    what = message[m.end() + n :].split(" script: ", 1)[0]
    return damaged(where, key, what.strip())


def damaged(where: str, key: str, what: str) -> StateError:
    """The StateError of a key whose value is not what the crawl keeps there."""
    return StateError(
        f"{where}: the crawl state in Redis is damaged: key {key} {what} (it was written by"
        " something else than this crawler: restore it, or start a new crawl with another"
        " --name)"
    )


def _shown(key: str | bytes) -> str:
    text = key.decode("utf-8", "replace") if isinstance(key, bytes) else key
    return ascii(text)[1:-1]


def _snippet(raw: Any) -> str:
    text = raw.decode("utf-8", "replace") if isinstance(raw, bytes) else str(raw)
    return ascii(text[:40] + ("..." if len(text) > 40 else ""))


def read_args(*items: tuple[str, str, int]) -> list[Any]:
    """The ``read`` script's ARGV for (key suffix, how, bound) triples."""
    return [x for item in items for x in item]


def as_int(where: str, key: str, raw: Any) -> int:
    """An integer read at ``key`` (bytes, str or int; None: 0)."""
    if raw is None:
        return 0
    if isinstance(raw, int):
        return raw
    try:
        return int(raw)
    except (TypeError, ValueError):
        raise damaged(where, _shown(key), f"holds {_snippet(raw)}, not an integer") from None


def as_float(where: str, key: str, raw: Any) -> float:
    """A number read at ``key`` (None: 0.0)."""
    if raw is None:
        return 0.0
    try:
        value = float(raw)
    except (TypeError, ValueError):
        raise damaged(where, _shown(key), f"holds {_snippet(raw)}, not a number") from None
    if value != value:  # NaN
        raise damaged(where, _shown(key), "holds NaN, not a number")
    return value


def text_of(where: str, key: str, raw: bytes) -> str:
    """A name read at ``key`` (a hash field: an error kind, a counter's name) as text."""
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError:
        raise damaged(where, _shown(key), "holds a name that is not UTF-8") from None


def int_hash(where: str, key: str, flat: Any) -> dict[str, int]:
    """A hash of counters, as the ``read`` script returns it (a flat list) or HGETALL does."""
    items = flat.items() if isinstance(flat, Mapping) else zip(flat[::2], flat[1::2], strict=True)
    return {text_of(where, key, k): as_int(where, key, v) for k, v in items}


def json_object(where: str, key: str, raw: bytes) -> dict[str, Any]:
    """A JSON object read at ``key``."""
    try:
        value = json.loads(raw)
    except (ValueError, UnicodeDecodeError) as exc:
        raise damaged(where, _shown(key), f"is not JSON ({exc})") from None
    if not isinstance(value, dict):
        raise damaged(where, _shown(key), f"holds a JSON {type(value).__name__}, not an object")
    return value


def refused_version(where: str, name: str, found: bytes, version: str) -> StateError:
    """The StateError of a crawl whose key layout this crawler does not read."""
    return StateError(
        f"{where}: the crawl {name!r} has key layout version"
        f" {found.decode('utf-8', 'replace')!r}, this crawler reads version"
        f" {version!r} (crawls made by an older crawler cannot be continued: finish"
        " it with that version, or use another --name or another database)"
    )


def robots_record(where: str, key: str, origin: str, raw: bytes) -> StoredRobots:
    """A stored robots.txt (a JSON head line, then the body), checked."""
    head, _, body = raw.partition(b"\n")
    meta = json_object(where, key, head)
    t, s, e = meta.get("t"), meta.get("s"), meta.get("e")
    if (
        not isinstance(t, (int, float))
        or not (s is None or type(s) is int)
        or not (e is None or isinstance(e, str))
    ):
        raise damaged(where, ascii(key)[1:-1], "is not a robots.txt record")
    return StoredRobots(origin, float(t), s, body, e)
