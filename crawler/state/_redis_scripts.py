"""The Lua scripts of the Redis crawl state (``crawler.state.redis``): each one atomic call.

Every script gets one key, the crawl's prefix ``P`` (``prefix_of(NAME)``: ``crawler:{NAME}:``;
the braces are a Redis Cluster hash tag, so that every key of a crawl lives in one slot), and
builds its key names from it. Layout (``o`` an origin, ``d`` a depth):

========================  ====================================================================
``P v``                   format version (string)
``P fpkey``               the fingerprint key (16 random bytes, SET NX at creation)
``P created``             server time the crawl was created
``P cfg``                 hash: per_host, delay, budget (max_pages_per_host; the last opener's
                          values, read by every script), bits (seen-set bucket bits, fixed)
``P s:<hex>``             seen set bucket: a SET of integers (the fingerprint's low bits;
                          the bucket is its top bits), intset-encoded while small
``P n``                   URLs seen (count)
``P c``                   hash of counts: queued, leased, done, origins, recovered
``P f``                   hash: failed by error kind
``P k``                   hash: the crawl's named counters
``P h``                   hash: host -> requests queued or done (budget; hosts in status)
``P o:<o>``               hash per origin: b (leases open), l (last start), d (own delay),
                          s ("1": in line, ready or asleep), w (queued + held + leased)
``P qd:<o>``              ZSET of the depths with queued requests of the origin
``P q:<o>\\t<d>``          LIST of the origin's queued requests at depth d (FIFO)
``P ready``               LIST of origins that may start a request now (round-robin)
``P sleep``               ZSET origin -> time its delay has passed
``P held``                ZSET retried request -> not_before
``P L``                   hash: lease id -> the leased request
``P E``                   ZSET lease id -> expiry
``P ids``                 lease id counter
``P rate``                hash: 10-second bucket -> completions (pages/s in status)
``P workers``             ZSET worker id -> server time its heartbeat lapses
``P wake``                pub/sub channel: published by offers, completions, retries
``P settings``            the crawl's settings (JSON)
``P r:<o>``               the origin's robots.txt (with a TTL)
========================  ====================================================================

Requests as stored: a queued item is ``attempts \\t payload``; a lease is ``origin \\t depth
\\t attempts \\t payload``; a held retry is ``id \\t origin \\t depth \\t attempts \\t
payload``. The payload (kind, referrer, URL) is opaque to the scripts.

Invariant: an origin is in line (``s`` = "1": once in ``ready`` or ``sleep``) iff it has
queued requests and fewer than per_host leases open. Delays are checked again when an
origin comes out of ``ready``, so that a Crawl-delay learnt meanwhile holds.

What the scripts read is not trusted (anyone who can write to Redis can write there): a record
they cannot split, or a request or origin name over ``MAX_ITEM`` bytes, is an error reply
naming the key (``crawler.state._redis_check``), never a Lua error or a value sent whole.
"""

from __future__ import annotations

from crawler.state._redis_check import BAD_STATE_LUA, CHECK, MAX_ITEM, READ

__all__ = ["DEFAULT_NAME", "SCRIPTS", "VERSION", "prefix_of"]

#: The key layout's version (``P v``); another one is refused.
VERSION = "1"
#: The crawl name when none is given (``--name``).
DEFAULT_NAME = "default"


def prefix_of(name: str | None) -> str:
    """The key prefix of crawl ``name``."""
    return f"crawler:{{{name or DEFAULT_NAME}}}:"


_COMMON = (
    BAD_STATE_LUA
    + f"local MAX_ITEM = {MAX_ITEM}\n"
    + r"""
local P = KEYS[1]
local C = P .. 'c'
local cfgv = redis.call('HMGET', P .. 'cfg', 'per_host', 'delay', 'budget')
local PER_HOST = tonumber(cfgv[1]) or 8
local DELAY = tonumber(cfgv[2]) or 0
local BUDGET = tonumber(cfgv[3]) or 0

local function okey(o) return P .. 'o:' .. o end

local function eff_delay(own)
  local d = tonumber(own) or 0
  if d < DELAY then d = DELAY end
  return d
end

-- put an origin in line if it has queued work and a free slot (at most once)
local function schedule(o)
  local ok = okey(o)
  local st = redis.call('HMGET', ok, 's', 'b', 'l', 'd')
  if st[1] == '1' then return end
  if (tonumber(st[2]) or 0) >= PER_HOST then return end
  if redis.call('EXISTS', P .. 'qd:' .. o) == 0 then return end
  redis.call('HSET', ok, 's', '1')
  local d = eff_delay(st[4])
  local last = tonumber(st[3]) or 0
  if d <= 0 or last == 0 then
    redis.call('RPUSH', P .. 'ready', o)
  else
    redis.call('ZADD', P .. 'sleep', last + d, o)
  end
end

local function add_work(o, n)
  local w = redis.call('HINCRBY', okey(o), 'w', n)
  if n > 0 and w == n then
    redis.call('HINCRBY', C, 'origins', 1)
    redis.call('PERSIST', okey(o))  -- it had work no more and was to be forgotten
  end
  if n < 0 and w <= 0 then redis.call('HINCRBY', C, 'origins', -1) end
  return w
end

-- queue an item (attempts \t payload) of origin o at depth d
local function push(o, d, item)
  redis.call('RPUSH', P .. 'q:' .. o .. '\t' .. d, item)
  redis.call('ZADD', P .. 'qd:' .. o, d, d)
  redis.call('HINCRBY', C, 'queued', 1)
  schedule(o)
end

-- end an open lease: nil if it is not open (completed already, or expired and requeued), or
-- if its request is not `url` (an id handed out again after Redis lost its last writes)
local function end_lease(id, url)
  local rec = redis.call('HGET', P .. 'L', id)
  if not rec then return nil end
  if url and url ~= '' and string.sub(rec, -#url) ~= url then return nil end
  redis.call('HDEL', P .. 'L', id)
  redis.call('ZREM', P .. 'E', id)
  redis.call('HINCRBY', C, 'leased', -1)
  local o = string.match(rec, '^([^\t]*)')
  redis.call('HINCRBY', okey(o), 'b', -1)
  return o, rec
end

-- a request handed back: its next lease is one more attempt; held until hold_until if given
local function requeue(id, rec, hold_until)
  local _, _, o, d, att, payload = string.find(rec, '^([^\t]*)\t(%d+)\t(%d+)\t(.*)$')
  if not o then bad(P .. 'L', ' holds a lease that is not "origin, depth, attempts, request"') end
  local item = tostring(tonumber(att) + 1) .. '\t' .. payload
  if hold_until then
    redis.call('ZADD', P .. 'held', hold_until, id .. '\t' .. o .. '\t' .. d .. '\t' .. item)
    redis.call('HINCRBY', C, 'queued', 1)
  else
    push(o, d, item)
  end
  schedule(o)
end

-- forget an idle origin (nothing queued or open, no own delay) once its delay has passed:
-- at once, or by a TTL of what is left of it (new work before then cancels the TTL)
local function forget(o, now)
  local ok = okey(o)
  local st = redis.call('HMGET', ok, 'w', 'd', 'l')
  if (tonumber(st[1]) or 0) > 0 or st[2] then return end
  local left = (tonumber(st[3]) or 0) + DELAY - now
  if left > 0 then
    redis.call('PEXPIRE', ok, math.ceil(left * 1000))
  else
    redis.call('DEL', ok)
  end
end

-- the earliest time a waiting request becomes leasable: an origin's delay or a not_before
local function due()
  local best = nil
  local s = redis.call('ZRANGE', P .. 'sleep', 0, 0, 'WITHSCORES')
  if s[2] then best = tonumber(s[2]) end
  local h = redis.call('ZRANGE', P .. 'held', 0, 0, 'WITHSCORES')
  if h[2] then
    local t = tonumber(h[2])
    if not best or t < best then best = t end
  end
  if best then return string.format('%.6f', best) end
  return ''
end

local function count_done(now, n)
  local b = math.floor(now / 10)
  redis.call('HINCRBY', P .. 'rate', b, n)
  if redis.call('HLEN', P .. 'rate') > 16 then
    for _, k in ipairs(redis.call('HKEYS', P .. 'rate')) do
      if (tonumber(k) or 0) < b - 12 then redis.call('HDEL', P .. 'rate', k) end
    end
  end
end
"""
)

# ARGV: version, fingerprint key, per_host, delay, budget, bucket bits, server-time flag
# -> {version found, fingerprint key, bucket bits}
_INIT = r"""
local P = KEYS[1]
local v = redis.call('GET', P .. 'v')
if v and v ~= ARGV[1] then return {v, '', ''} end
if not v then
  redis.call('SET', P .. 'v', ARGV[1])
  local t = redis.call('TIME')
  redis.call('SET', P .. 'created', t[1] .. '.' .. string.format('%06d', tonumber(t[2])))
end
redis.call('SET', P .. 'fpkey', ARGV[2], 'NX')
redis.call('HSET', P .. 'cfg', 'per_host', ARGV[3], 'delay', ARGV[4], 'budget', ARGV[5])
redis.call('HSETNX', P .. 'cfg', 'bits', ARGV[6])
return {ARGV[1], redis.call('GET', P .. 'fpkey'), redis.call('HGET', P .. 'cfg', 'bits')}
"""

# ARGV: worker id, then one per candidate: "bucket \t member \t queue \t depth \t origin \t
# host \t payload" (one argument, not seven: packing arguments is most of a client's cost)
# -> {due, flags ("1" new, "0" seen before, one a candidate)}
_OFFER = (
    _COMMON
    + r"""
local flags = {}
local new, queued = 0, 0
local work, order, depths = {}, {}, {}
local FIELDS = '^([^\t]*)\t([^\t]*)\t([^\t]*)\t([^\t]*)\t([^\t]*)\t([^\t]*)\t(.*)$'
for i = 2, #ARGV do
  local _, _, bucket, member, q, d, o, host, payload = string.find(ARGV[i], FIELDS)
  if redis.call('SADD', P .. 's:' .. bucket, member) == 1 then
    new = new + 1
    flags[#flags + 1] = '1'
    if q == '1' then
      if BUDGET <= 0 or (tonumber(redis.call('HGET', P .. 'h', host)) or 0) < BUDGET then
        redis.call('HINCRBY', P .. 'h', host, 1)
        redis.call('RPUSH', P .. 'q:' .. o .. '\t' .. d, '0\t' .. payload)
        local od = o .. '\t' .. d
        if not depths[od] then
          redis.call('ZADD', P .. 'qd:' .. o, d, d)
          depths[od] = true
        end
        if not work[o] then
          work[o] = 0
          order[#order + 1] = o
        end
        work[o] = work[o] + 1
        queued = queued + 1
      end
    end
  else
    flags[#flags + 1] = '0'
  end
end
-- once per origin and per depth, not per URL: the origins in the order they came
if queued > 0 then
  redis.call('HINCRBY', C, 'queued', queued)
  for _, o in ipairs(order) do
    add_work(o, work[o])
    schedule(o)
  end
  redis.call('PUBLISH', P .. 'wake', ARGV[1])
end
if new > 0 then redis.call('INCRBY', P .. 'n', new) end
return {due(), table.concat(flags)}
"""
)

# ARGV: now, n, expires, budget (0: none), reclaim ("0": take no expired lease back) ->
# {due, recovered, then per lease: id, origin, depth, item}
_LEASE = (
    _COMMON
    + r"""
local now = tonumber(ARGV[1])
local n = tonumber(ARGV[2])
-- leases whose holder did not complete or renew them in time go back to their queue
-- (not by a worker just back from an outage: ARGV[5] "0")
local recovered = 0
local expired = {}
if ARGV[5] ~= '0' then
  expired = redis.call('ZRANGEBYSCORE', P .. 'E', '-inf', now, 'LIMIT', 0, 256)
end
for _, id in ipairs(expired) do
  local o, rec = end_lease(id)
  if o then
    requeue(id, rec, nil)
    recovered = recovered + 1
  else
    redis.call('ZREM', P .. 'E', id)
  end
end
if recovered > 0 then redis.call('HINCRBY', C, 'recovered', recovered) end
-- retried requests whose not_before has come
for _, m in ipairs(redis.call('ZRANGEBYSCORE', P .. 'held', '-inf', now, 'LIMIT', 0, 256)) do
  redis.call('ZREM', P .. 'held', m)
  local _, _, o, d, item = string.find(m, '^[^\t]*\t([^\t]*)\t(%d+)\t(.*)$')
  if not o then bad(P .. 'held', ' holds a retry that is not "id, origin, depth, request"') end
  redis.call('HINCRBY', C, 'queued', -1)
  push(o, d, item)
end
-- origins whose delay has passed join the line
for _, o in ipairs(redis.call('ZRANGEBYSCORE', P .. 'sleep', '-inf', now, 'LIMIT', 0, n + 64)) do
  redis.call('ZREM', P .. 'sleep', o)
  redis.call('RPUSH', P .. 'ready', o)
end
-- a crawl-wide page budget (max_pages): no lease past done (robots skips aside) + leased
local budget = tonumber(ARGV[4]) or 0
if budget > 0 then
  local c = redis.call('HMGET', C, 'done', 'leased')
  local skipped = tonumber(redis.call('HGET', P .. 'f', 'robots_disallowed')) or 0
  local room = budget - ((tonumber(c[1]) or 0) - skipped + (tonumber(c[2]) or 0))
  if room < n then n = room end
end
local out = {'', recovered}
local got = 0
while got < n do
  local o = redis.call('LPOP', P .. 'ready')
  if not o then break end
  if #o > MAX_ITEM then bad(P .. 'ready', ' holds an origin of ' .. #o .. ' bytes') end
  local ok = okey(o)
  local st = redis.call('HMGET', ok, 'b', 'l', 'd')
  local busy = tonumber(st[1]) or 0
  local d = eff_delay(st[3])
  local allowed = (tonumber(st[2]) or 0) + d
  local qd = P .. 'qd:' .. o
  if busy >= PER_HOST then
    redis.call('HSET', ok, 's', '0')
  elseif d > 0 and allowed > now then
    redis.call('ZADD', P .. 'sleep', allowed, o)
  else
    local depth = redis.call('ZRANGE', qd, 0, 0)[1]
    local item = nil
    if depth then
      local q = P .. 'q:' .. o .. '\t' .. depth
      item = redis.call('LPOP', q)
      if redis.call('EXISTS', q) == 0 then redis.call('ZREM', qd, depth) end
      if item and (#item > MAX_ITEM or not string.match(item, '^%d+\t')) then
        bad(q, ' holds a request not "attempts, request" of at most ' .. MAX_ITEM .. ' bytes')
      end
    end
    if not item then
      redis.call('HSET', ok, 's', '0')
    else
      local id = redis.call('INCR', P .. 'ids')
      redis.call('HSET', P .. 'L', id, o .. '\t' .. depth .. '\t' .. item)
      redis.call('ZADD', P .. 'E', ARGV[3], id)
      busy = busy + 1
      redis.call('HSET', ok, 'b', busy, 'l', ARGV[1])
      out[#out + 1] = id
      out[#out + 1] = o
      out[#out + 1] = depth
      out[#out + 1] = item
      got = got + 1
      if busy >= PER_HOST or redis.call('EXISTS', qd) == 0 then
        redis.call('HSET', ok, 's', '0')
      elseif d > 0 then
        redis.call('ZADD', P .. 'sleep', now + d, o)
      else
        redis.call('RPUSH', P .. 'ready', o)
      end
    end
  end
end
if got > 0 then
  redis.call('HINCRBY', C, 'queued', -got)
  redis.call('HINCRBY', C, 'leased', got)
end
out[1] = due()
return out
"""
)

# ARGV: worker id, now, then triples: lease id, its URL, error kind ("" for success)
# -> {due, completed}
_COMPLETE = (
    _COMMON
    + r"""
local now = tonumber(ARGV[2])
local done = 0
for i = 3, #ARGV, 3 do
  local o = end_lease(ARGV[i], ARGV[i + 1])
  if o then
    done = done + 1
    if ARGV[i + 2] ~= '' then redis.call('HINCRBY', P .. 'f', ARGV[i + 2], 1) end
    if add_work(o, -1) <= 0 then forget(o, now) else schedule(o) end
  end
end
if done > 0 then
  redis.call('HINCRBY', C, 'done', done)
  count_done(now, done)
  redis.call('PUBLISH', P .. 'wake', ARGV[1])
end
return {due(), done}
"""
)

# ARGV: worker id, now, not_before, lease id, its URL -> {due, 1 if it was open}
# (not_before <= now: queued at once)
_RETRY = (
    _COMMON
    + r"""
local now = tonumber(ARGV[2])
local nb = tonumber(ARGV[3])
local o, rec = end_lease(ARGV[4], ARGV[5])
if not o then return {due(), 0} end
if nb > now then requeue(ARGV[4], rec, ARGV[3]) else requeue(ARGV[4], rec, nil) end
redis.call('PUBLISH', P .. 'wake', ARGV[1])
return {due(), 1}
"""
)

# ARGV: worker id, then pairs: lease id, its URL -> {due, given back}: a worker's clean stop
# hands its open leases back at once (they count as recovered), so nobody waits for them
_GIVE_BACK = (
    _COMMON
    + r"""
local n = 0
for i = 2, #ARGV, 2 do
  local o, rec = end_lease(ARGV[i], ARGV[i + 1])
  if o then
    requeue(ARGV[i], rec, nil)
    n = n + 1
  end
end
if n > 0 then
  redis.call('HINCRBY', C, 'recovered', n)
  redis.call('PUBLISH', P .. 'wake', ARGV[1])
end
return {due(), n}
"""
)

# ARGV: pairs origin, delay: an origin's own delay (robots Crawl-delay); <= the crawl's
# delay: dropped
_SET_DELAY = (
    _COMMON
    + r"""
for i = 1, #ARGV, 2 do
  local ok = okey(ARGV[i])
  if tonumber(ARGV[i + 1]) > DELAY then
    redis.call('HSET', ok, 'd', ARGV[i + 1])
    redis.call('PERSIST', ok)
  else
    redis.call('HDEL', ok, 'd')
  end
end
return due()
"""
)

# ARGV: worker id, seconds it counts as alive, lease expiry, lease ids -> renewed
# (ZADD XX GT: only the holder's open leases, never shortened)
_HEARTBEAT = r"""
local P = KEYS[1]
local t = redis.call('TIME')
local now = tonumber(t[1]) + tonumber(t[2]) / 1e6
redis.call('ZADD', P .. 'workers', now + tonumber(ARGV[2]), ARGV[1])
redis.call('ZREMRANGEBYSCORE', P .. 'workers', '-inf', now - 3600)
local n = 0
for i = 4, #ARGV do
  n = n + redis.call('ZADD', P .. 'E', 'XX', 'GT', 'CH', ARGV[3], ARGV[i])
end
return n
"""

# ARGV: worker id (leaving)
_LEAVE = r"""
redis.call('ZREM', KEYS[1] .. 'workers', ARGV[1])
return 1
"""

#: name -> Lua source (loaded once with SCRIPT LOAD, run with EVALSHA, re-loaded on NOSCRIPT)
SCRIPTS: dict[str, str] = {
    "init": _INIT,
    "offer": _OFFER,
    "lease": _LEASE,
    "complete": _COMPLETE,
    "retry": _RETRY,
    "give_back": _GIVE_BACK,
    "set_delay": _SET_DELAY,
    "heartbeat": _HEARTBEAT,
    "leave": _LEAVE,
    "check": CHECK,
    "read": READ,
}
