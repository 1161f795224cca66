"""The Lua scripts of the Redis crawl state (``crawler.state.redis``) and its key layout.

Version 4 (issue 23): the crawl is split into ``shards`` virtual shards (256 by default,
fixed at creation) by a hash of the host (``crawler.state._redis_owner.shard_of``: the
origins of one host, and so its ``max_pages_per_host`` budget, are in one shard; with a
``split`` K > 1, in K shards, each with its share: ``crawler.state._redis_split``); each shard
is owned by one live worker (``crawler.state._redis_owner``), which holds the shard's queue and
politeness in memory and leases from it without a Redis call. What stays in Redis is what a
takeover must find: every request not yet completed (``S p``), the seen fingerprints
(``S s:<hex>``) and the shard's counts.

Two kinds of prefix. ``P`` = ``crawler:{NAME}:`` holds the crawl-wide keys; ``S`` =
``crawler:{NAME:sK}:`` those of shard K (``shard_prefix(NAME, K)``). The braces are Redis
Cluster hash tags: each shard is one slot, so a crawl's shards spread over a cluster's
masters, the crawl-wide keys in one more slot. **Every key a per-page script touches (offer,
complete, retry, give back) is its shard's**: on a cluster such a script runs on the shard's
master alone, in one atomic step with the shard's counts. The crawl-wide keys are those that
no per-page step needs atomically: membership, claims, inboxes, settings, robots.txt, the
page budget (``P a``, its own step), the workers' counter totals (``P kw``, idempotent) and
the pages/s buckets (``P rate``, approximate).

========================  ====================================================================
``P v``                   format version (string)
``P fpkey``               the fingerprint key (16 random bytes, SET NX at creation)
``P created``             server time the crawl was created
``P cfg``                 hash: per_host, delay, budget (max_pages_per_host; the last opener's
                          values), bits (seen-set bucket bits), shards, split (the parts of a
                          host: ``crawler.state._redis_split``; these three fixed)
``P k``                   hash: the crawl's named counters (layout 1's; read, not written)
``P kw``                  hash: worker run -> its named counters' totals ("name=n" lines),
                          written with its completions (same round trip, not the same atomic
                          step: totals, so a write again is harmless); the crawl's are their sum
``P a``                   page budget used (max_pages): leases granted - given back - skips
``P rate``                hash: 10-second bucket -> completions (pages/s in status; a plain
                          HINCRBY beside the completions, approximate; the ``rate`` script
                          trims old buckets when a worker's bucket changes)
``P workers``             ZSET worker id -> server time its heartbeat lapses
``P ws``                  hash worker id -> "queued leased busy" (its last report)
``P own``                 hash shard -> the worker that claims it
``P cx``                  ZSET worker -> server time its claims lapse unless renewed
``P in:<worker>``         STREAM: the worker's inbox (new requests of its shards, from others)
``P settings``            the crawl's settings (JSON)
``P r:<o>``               the origin's robots.txt (with a TTL)
``P used``                SET of the shards that ever held a request (written before the
                          first offer of a shard, so a superset: what ``tally`` sums)
``P c``                   hash: the crawl's counts (``S c``'s fields, and q: requests ever
                          queued) in a crawl of layout 5 on one Redis server (``P cfg
                          counts`` = 1): the scripts' counts go here, and the open requests
                          are q - done - the failed; ``tally`` reads this one hash, not two
                          keys a shard the crawl used
``S p``                   hash fingerprint -> request not completed: ``attempts \\t
                          not_before \\t depth \\t origin \\t payload``
``S d``                   hash origin -> own delay (robots.txt Crawl-delay)
``S c``                   hash: done, recovered, x (URLs seen and not queued), ``f:<kind>``
                          (failed by error kind); the shard's open requests are ``HLEN S p``
                          and its URLs seen open + done + x: the crawl's are the sums over
                          ``P used`` (an HGETALL and an HLEN a shard); only the sums are read,
                          so a script call's counts go to the first key it names (with
                          ``P cfg counts`` = 1, that key is ``P``: ``P c`` above)
``S h``                   hash host -> requests queued or done (max_pages_per_host only)
``S s:<hex>``             seen set bucket: a SET of integers (the fingerprint's low bits; the
                          bucket is its top ``shard_seen_bits`` bits), intset-encoded while
                          small (up to Redis's ``set-max-intset-entries``, 512 by default)
========================  ====================================================================

The payload (``kind \\t len(referrer) \\t referrer + url``) is opaque to the scripts. A
script that reads what it cannot split, or a value over ``MAX_ITEM`` bytes, answers an error
naming the key (``crawler.state._redis_check``).

Scripts on shards' keys get them as ``KEYS`` and their records name a key by its index: on
one Redis server a script takes several shards at once (one round trip for a chunk of links
of many shards); on a cluster the same script is called once a shard, the calls of a chunk
sent in one pipeline (``crawler.state._redis_link``: one round trip a node).
"""

from __future__ import annotations

from crawler.state._redis_check import BAD_STATE_LUA, CHECK, MAX_ITEM, READ

__all__ = [
    "DEFAULT_NAME",
    "DEFAULT_SHARDS",
    "FRAMED",
    "READABLE",
    "SCRIPTS",
    "VERSION",
    "prefix_of",
    "shard_prefix",
    "shard_seen_bits",
]

#: The key layout's version (``P v``) of a new crawl; those of ``READABLE`` are read, another
#: one is refused. 4 is 3 with ``P cfg split`` (``crawler.state._redis_split``): a host's
#: requests may be in K shards, which a crawler of layout 3 would not look for, so it is
#: refused there; a crawl of layout 3 is continued here as it is (split 1). 5 is 4 with
#: ``P cfg counts``: 1 (a new crawl on one Redis server) keeps the crawl's counts in ``P c``,
#: which a crawler of layout 4 would not read; a crawl of layout 3 or 4 goes on with its
#: counts in its shards.
VERSION = "5"
READABLE = ("3", "4", "5")
#: The crawl name when none is given (``--name``).
DEFAULT_NAME = "default"
#: Virtual shards of a new crawl (fixed then).
DEFAULT_SHARDS = 256


def prefix_of(name: str | None) -> str:
    """The crawl-wide key prefix of crawl ``name``."""
    return f"crawler:{{{name or DEFAULT_NAME}}}:"


def shard_seen_bits(bits: int, shards: int) -> int:
    """Seen-set bucket bits of each shard: ``bits`` less log2(``shards``) (at least 1), so
    that a crawl whose URLs spread over its shards has about 2**``bits`` buckets in all, as
    layout 2's one seen set had. A one-host crawl fills one shard's buckets only
    (``docs/distributed.md``, "Redis Cluster", has the bytes a URL of both)."""
    return max(1, bits - (shards.bit_length() - 1))


def shard_prefix(name: str | None, shard: int) -> str:
    """The key prefix of shard ``shard`` of crawl ``name`` (a hash tag of its own)."""
    return f"crawler:{{{name or DEFAULT_NAME}:s{shard}}}:"


_NOW = r"""
local function server_now()
  local t = redis.call('TIME')
  return tonumber(t[1]) + tonumber(t[2]) / 1e6
end
"""

# KEYS[1] P; ARGV: version, fingerprint key, per_host, delay, budget, bits, shards, split
# ("0": no opinion) -> {version found, fingerprint key, bits, shards, split ("" if none yet)};
# a crawl of layout 3 is read as it is: its hosts are not split
_INIT = r"""
local P = KEYS[1]
local v = redis.call('GET', P .. 'v')
if v and v ~= ARGV[1] and v ~= '3' and v ~= '4' then return {v, '', '', '', '', ''} end
if v == '3' then redis.call('HSETNX', P .. 'cfg', 'split', '1') end
if ARGV[8] ~= '0' then redis.call('HSETNX', P .. 'cfg', 'split', ARGV[8]) end
if not v then
  redis.call('SET', P .. 'v', ARGV[1])
  redis.call('HSET', P .. 'cfg', 'counts', ARGV[9])
  local t = redis.call('TIME')
  redis.call('SET', P .. 'created', t[1] .. '.' .. string.format('%06d', tonumber(t[2])))
end
redis.call('SET', P .. 'fpkey', ARGV[2], 'NX')
redis.call('HSET', P .. 'cfg', 'per_host', ARGV[3], 'delay', ARGV[4], 'budget', ARGV[5])
redis.call('HSETNX', P .. 'cfg', 'bits', ARGV[6])
redis.call('HSETNX', P .. 'cfg', 'shards', ARGV[7])
local cfg = redis.call('HMGET', P .. 'cfg', 'bits', 'shards', 'split', 'counts')
return {v or ARGV[1], redis.call('GET', P .. 'fpkey'), cfg[1], cfg[2], cfg[3] or '', cfg[4] or '0'}
"""

# The records of a hot script (``put``, ``complete``) come in one argument, each framed as
# "<length>:<key index> TAB <fields>" (``calls_for(framed=True)``): one string for the client
# to encode a call, not two a record (redis-py encodes each argument in Python). ``unframe``
# reads them all before the script writes anything, so a call it cannot read changes nothing.
_UNFRAME = r"""
local function unframe(blob)
  local out = {}
  local pos, n = 1, #blob
  while pos <= n do
    local colon = string.find(blob, ':', pos, true)
    local len = colon and tonumber(string.sub(blob, pos, colon - 1))
    if not len or colon + len > n then return nil end
    out[#out + 1] = string.sub(blob, colon + 1, colon + len)
    pos = colon + len + 1
  end
  return out
end
"""

# KEYS: where the counts go (``P``, or the first shard) and shard prefixes; ARGV:
# max_pages_per_host (as the last heartbeat read it), "1" to count the requests queued (q:
# ``P c``), then the records framed (``_UNFRAME``): "key index \t bucket \t member \t fp \t
# queue \t host \t value" ->
# flags: "1" new and queued, "2" new not queued, "0" seen (dedup, enqueue and the shard's
# counts in one step: a fingerprint is never seen without its request queued). ``queue`` is
# "0" (not queued), "1" (queued within BUDGET) or "1:<n>" (within ``n``: the budget's share of
# a host's part)
_PUT = (
    _UNFRAME
    + r"""
local BUDGET = tonumber(ARGV[1]) or 0
local flags = {}
local new = {}
local open = {}
local FIELDS = '^(%d+)\t([^\t]*)\t([^\t]*)\t([^\t]*)\t([^\t]*)\t([^\t]*)\t(.*)$'
local records = unframe(ARGV[3] or '')
if not records then return redis.error_reply('ERR offers this script cannot read') end
local parsed = {}
for i, rec in ipairs(records) do
  local _, _, ki, bucket, member, fp, q, host, value = string.find(rec, FIELDS)
  local S = ki and KEYS[tonumber(ki)]
  if not S then return redis.error_reply('ERR an offer this script cannot read') end
  parsed[i] = {S, bucket, member, fp, q, host, value, tonumber(ki)}
end
for _, r in ipairs(parsed) do
  local S, bucket, member, fp, q, host, value, ki = unpack(r)
  if redis.call('SADD', S .. 's:' .. bucket, member) == 1 then
    local take = q ~= '0'
    local budget = BUDGET
    if #q > 2 then budget = tonumber(string.sub(q, 3)) or BUDGET end
    if take and budget > 0 then
      take = (tonumber(redis.call('HGET', S .. 'h', host)) or 0) < budget
      if take then redis.call('HINCRBY', S .. 'h', host, 1) end
    end
    if take then
      local o = open[ki]
      if not o then
        o = {}
        open[ki] = o
      end
      o[#o + 1] = fp
      o[#o + 1] = value
      flags[#flags + 1] = '1'
    else
      new[ki] = (new[ki] or 0) + 1
      flags[#flags + 1] = '2'
    end
  else
    flags[#flags + 1] = '0'
  end
end
-- one HSET a shard (nothing above reads S p), in runs that Lua's unpack takes
local queued = 0
for ki, o in pairs(open) do
  for j = 1, #o, 1000 do
    queued = queued + redis.call('HSET', KEYS[ki] .. 'p', unpack(o, j, math.min(j + 999, #o)))
  end
end
local x = 0  -- (only read summed: in KEYS[1]'s counts)
for _, n in pairs(new) do x = x + n end
if x > 0 then redis.call('HINCRBY', KEYS[1] .. 'c', 'x', x) end
if ARGV[2] == '1' and queued > 0 then redis.call('HINCRBY', KEYS[1] .. 'c', 'q', queued) end
return table.concat(flags)
"""
)

# KEYS: where the counts go (``P``, or the first shard) and shard prefixes; ARGV: "1" to count
# the requests queued (q), then the records framed (``_UNFRAME``): "key index TAB fp TAB seen
# bucket TAB seen member TAB error kind or nothing" -> completed (those still
# open: a request completed twice counts once). A request not open that the seen set does not
# know either was offered in writes Redis lost (a restart without its last second): it is added
# to the seen set and counted done, so that an offer of it again is refused (its page was
# fetched) and the crawl's numbers stay whole (and, with q, counted queued: q - done stays
# what is open). The shard's counts change in the same step as its requests. The pages
# fetched (no error kind) of a shard go in one HDEL (its answer, how many were open, is all
# that is counted of them; the seen set is asked only when fewer were open than given); each
# failed one in its own (its kind is counted only if it was open).
_COMPLETE = (
    _UNFRAME
    + r"""
local total = 0
local kinds = {}
local fine = {}
local lost = 0
local FIELDS = '^(%d+)\t(%d+)\t(%x+)\t(%d+)\t(.*)$'
local records = unframe(ARGV[2] or '')
if not records then return redis.error_reply('ERR completions this script cannot read') end
local parsed = {}
for i, rec in ipairs(records) do
  local _, _, ki, fp, bucket, member, kind = string.find(rec, FIELDS)
  ki = tonumber(ki)
  if not ki or not KEYS[ki] then
    return redis.error_reply('ERR a completion this script cannot read')
  end
  parsed[i] = {ki, fp, bucket, member, kind}
end
for _, r in ipairs(parsed) do
  local ki, fp, bucket, member, kind = unpack(r)
  local S = KEYS[ki]
  if kind == '' then
    local f = fine[ki]
    if not f then
      f = {{}, {}}
      fine[ki] = f
    end
    f[1][#f[1] + 1] = fp
    f[2][#f[2] + 1] = bucket
    f[2][#f[2] + 1] = member
  else
    local counted = redis.call('HDEL', S .. 'p', fp) == 1
    if not counted then
      counted = redis.call('SADD', S .. 's:' .. bucket, member) == 1
      if counted then lost = lost + 1 end
    end
    if counted then
      total = total + 1
      kinds[kind] = (kinds[kind] or 0) + 1
    end
  end
end
for ki, f in pairs(fine) do
  local S = KEYS[ki]
  local fps = f[1]
  local open = 0
  for j = 1, #fps, 1000 do
    open = open + redis.call('HDEL', S .. 'p', unpack(fps, j, math.min(j + 999, #fps)))
  end
  total = total + open
  if open < #fps then
    -- not all open: those the seen set does not know either are counted (lost writes); the
    -- others, open a moment ago or completed before, are in it already
    local seen = f[2]
    for j = 1, #seen, 2 do
      local added = redis.call('SADD', S .. 's:' .. seen[j], seen[j + 1])
      total = total + added
      lost = lost + added
    end
  end
end
-- counts are only read summed: one HINCRBY a call, in KEYS[1]'s
if total > 0 then
  local c = KEYS[1] .. 'c'
  redis.call('HINCRBY', c, 'done', total)
  for kind, n in pairs(kinds) do redis.call('HINCRBY', c, 'f:' .. kind, n) end
  if ARGV[1] == '1' and lost > 0 then redis.call('HINCRBY', c, 'q', lost) end
end
return total
"""
)

# KEYS[1] P; ARGV: now -> 1: the pages/s buckets of ``crawler status`` older than two
# minutes dropped (sent with a worker's first completions in a new 10-second bucket; the
# completions themselves are a plain HINCRBY beside them, not in their atomic step:
# approximate)
_RATE = r"""
local r = KEYS[1] .. 'rate'
local b = math.floor(tonumber(ARGV[1]) / 10)
if redis.call('HLEN', r) > 16 then
  for _, k in ipairs(redis.call('HKEYS', r)) do
    if (tonumber(k) or 0) < b - 12 then redis.call('HDEL', r, k) end
  end
end
return 1
"""

# KEYS: where the counts go (``P``, or the first shard) and shard prefixes; ARGV: quads (key
# index, fp, value, recovered "1"/"0"): a request back in line (retried, given back, or a new
# attempt after a takeover): rewritten only while it is still open; those given back by a
# closing worker count as recovered -> rewritten
_REQUEUE = r"""
local n = 0
local recovered = 0
for i = 1, #ARGV, 4 do
  local ki = tonumber(ARGV[i])
  local p = KEYS[ki] .. 'p'
  if redis.call('HEXISTS', p, ARGV[i + 1]) == 1 then
    redis.call('HSET', p, ARGV[i + 1], ARGV[i + 2])
    n = n + 1
  end
  if ARGV[i + 3] == '1' then recovered = recovered + 1 end
end
-- (only read summed: in KEYS[1]'s counts)
if recovered > 0 then redis.call('HINCRBY', KEYS[1] .. 'c', 'recovered', recovered) end
return n
"""

# KEYS: shard prefixes; ARGV: triples (key index, origin, delay or "" to drop) -> 1
_DELAY = r"""
for i = 1, #ARGV, 3 do
  local d = KEYS[tonumber(ARGV[i])] .. 'd'
  if ARGV[i + 2] == '' then
    redis.call('HDEL', d, ARGV[i + 1])
  else
    redis.call('HSET', d, ARGV[i + 1], ARGV[i + 2])
  end
end
return 1
"""

# KEYS: shard prefixes; ARGV: cursor, count -> per key {cursor, flat fp/value pairs, flat
# delays (on the first page only)}: shards' open requests, read by their new owner (one call
# for many shards: most hold little)
_LOAD = (
    BAD_STATE_LUA
    + f"local MAX_ITEM = {MAX_ITEM}\n"
    + r"""
local out = {}
for _, S in ipairs(KEYS) do
  ktype(S .. 'p', 'hash')
  local page = redis.call('HSCAN', S .. 'p', ARGV[1], 'COUNT', ARGV[2])
  local flat = page[2]
  for i = 1, #flat, 2 do
    local v = flat[i + 1]
    if #v > MAX_ITEM or #flat[i] > 32 or not string.match(flat[i], '^%d+$')
        or not string.match(v, '^%d+\t[%d%.]*\t%d+\t[^\t]+\t%d+\t%d*\t') then
      bad(S .. 'p', ' holds a request this crawler cannot read')
    end
  end
  local delays = {}
  if ARGV[1] == '0' and ktype(S .. 'd', 'hash') then delays = redis.call('HGETALL', S .. 'd') end
  out[#out + 1] = {page[1], flat, delays}
end
return out
"""
)

# KEYS[1] P; ARGV: worker id, seconds it counts as alive, claim seconds, its report
# ("queued leased busy origins shards-with-work") -> {server time, live workers (flat),
# claims (flat shard, worker), max_pages_per_host, per_host, delay, the workers' reports
# (flat)}: the heartbeat, renewing all this worker's claims at once (``P cx``: a claim
# lapses when its holder's heartbeat stopped for the
# claim seconds)
_BEAT = (
    _NOW
    + r"""
local P = KEYS[1]
local now = server_now()
local wid = ARGV[1]
redis.call('ZADD', P .. 'workers', now + tonumber(ARGV[2]), wid)
redis.call('HSET', P .. 'ws', wid, ARGV[4])
redis.call('ZADD', P .. 'cx', now + tonumber(ARGV[3]), wid)
-- workers gone for a minute: their report and inbox go (their shards are claimed again)
for _, w in ipairs(redis.call('ZRANGEBYSCORE', P .. 'workers', '-inf', now - 60)) do
  redis.call('ZREM', P .. 'workers', w)
  redis.call('HDEL', P .. 'ws', w)
  redis.call('DEL', P .. 'in:' .. w)
end
redis.call('ZREMRANGEBYSCORE', P .. 'cx', '-inf', now - 3600)
local live = redis.call('ZRANGEBYSCORE', P .. 'workers', '(' .. now, '+inf')
local cfg = redis.call('HMGET', P .. 'cfg', 'per_host', 'delay', 'budget', 'split')
return {string.format('%.6f', now), live, redis.call('HGETALL', P .. 'own'), cfg[3] or '',
        cfg[1] or '', cfg[2] or '', redis.call('HGETALL', P .. 'ws'), cfg[4] or ''}
"""
)

# KEYS[1] P; ARGV: worker id, claim seconds, quiet ("1": take no lapsed claim), shards ->
# the shards now claimed by this worker: free ones, its own, lapsed ones (unless quiet)
_CLAIM = (
    _NOW
    + r"""
local P = KEYS[1]
local now = server_now()
local wid = ARGV[1]
local out = {}
for i = 4, #ARGV do
  local k = ARGV[i]
  local holder = redis.call('HGET', P .. 'own', k)
  local take = not holder or holder == wid
  if not take and ARGV[3] ~= '1' then
    take = (tonumber(redis.call('ZSCORE', P .. 'cx', holder)) or 0) < now
  end
  if take then
    redis.call('HSET', P .. 'own', k, wid)
    out[#out + 1] = k
  end
end
return out
"""
)

# KEYS[1] P; ARGV: worker id, leaving ("1": out of the workers), shards -> released
_RELEASE = r"""
local P = KEYS[1]
local wid = ARGV[1]
local n = 0
for i = 3, #ARGV do
  if redis.call('HGET', P .. 'own', ARGV[i]) == wid then
    redis.call('HDEL', P .. 'own', ARGV[i])
    n = n + 1
  end
end
if ARGV[2] == '1' then
  redis.call('ZREM', P .. 'workers', wid)
  redis.call('ZREM', P .. 'cx', wid)
  redis.call('HDEL', P .. 'ws', wid)
  redis.call('DEL', P .. 'in:' .. wid)
end
return n
"""

# KEYS[1] P; ARGV: worker id, its report -> 1 (a worker turning busy or idle says so)
_REPORT = r"""
redis.call('HSET', KEYS[1] .. 'ws', ARGV[1], ARGV[2])
return 1
"""

# The shards' counts summed: KEYS[first..] shard prefixes -> {flat name, total (done,
# recovered, x, "f:<kind>"; queued: the open requests, HLEN of S p), hosts in the budget (if
# `hosts`)}: an HGETALL and an HLEN a shard
_SUM_LUA = r"""
local function sum_shards(first, hosts_too)
  local sums = {}
  local hosts = 0
  for i = first, #KEYS do
    local key = KEYS[i] .. 'c'
    local all = redis.pcall('HGETALL', key)
    if all.err then ktype(key, 'hash') end
    for j = 1, #all, 2 do
      local n = string.match(all[j + 1], '^%-?%d+$') and tonumber(all[j + 1])
      if not n or #all[j] > 256 then bad(key, ' holds a field that is not an integer') end
      sums[all[j]] = (sums[all[j]] or 0) + n
    end
    local open = redis.pcall('HLEN', KEYS[i] .. 'p')
    if type(open) ~= 'number' then ktype(KEYS[i] .. 'p', 'hash') end
    sums.queued = (sums.queued or 0) + open
    if hosts_too and ktype(KEYS[i] .. 'h', 'hash') then
      hosts = hosts + redis.call('HLEN', KEYS[i] .. 'h')
    end
  end
  local flat = {}
  for k, v in pairs(sums) do
    flat[#flat + 1] = k
    flat[#flat + 1] = string.format('%d', v)
  end
  return {flat, hosts}
end
"""

# KEYS[1] P, KEYS[2..] shard prefixes (one Redis server: those of ``P used``; none on a
# cluster); ARGV: shards, hosts ("1": count the budget's hosts) -> {reports of live workers
# (flat), requests in inboxes, shards without a live claim, the shards ever used (``P
# used``), the sums of KEYS[2..]}: where the whole crawl stands, one round trip
_TALLY = (
    BAD_STATE_LUA
    + _SUM_LUA
    + _NOW
    + r"""
local P = KEYS[1]
local now = server_now()
local live = {}
local reports = {}
for _, w in ipairs(redis.call('ZRANGEBYSCORE', P .. 'workers', '(' .. now, '+inf')) do
  live[w] = true
  reports[#reports + 1] = w
  reports[#reports + 1] = redis.call('HGET', P .. 'ws', w) or ''
end
-- (the live workers' inboxes only: a dead worker's messages are hints nobody reads, the
-- requests are in the shards, found by a load or an idle owner's heal)
local inbox = 0
for w, _ in pairs(live) do inbox = inbox + redis.call('XLEN', P .. 'in:' .. w) end
local orphans = tonumber(ARGV[1]) - redis.call('HLEN', P .. 'own')
local own = redis.call('HVALS', P .. 'own')
for i = 1, #own do
  if not live[own[i]] then orphans = orphans + 1 end
end
local used = {}
if ktype(P .. 'used', 'set') then used = redis.call('SMEMBERS', P .. 'used') end
return {reports, inbox, orphans, used, sum_shards(2, ARGV[2] == '1')}
"""
)

# KEYS: shard prefixes; ARGV: hosts ("1": count the budget's hosts) -> their sums (on a
# cluster: one call a shard, pipelined with ``tally``)
_SUMS = BAD_STATE_LUA + _SUM_LUA + "return sum_shards(1, ARGV[1] == '1')\n"

# KEYS[1] P; ARGV: budget, n -> granted: n < 0 gives back; else at most what is left of it
_ADMIT = r"""
local n = tonumber(ARGV[2])
if n < 0 then return redis.call('INCRBY', KEYS[1] .. 'a', n) and 0 end
local used = tonumber(redis.call('GET', KEYS[1] .. 'a')) or 0
local room = tonumber(ARGV[1]) - used
if room < n then n = room end
if n <= 0 then return 0 end
redis.call('INCRBY', KEYS[1] .. 'a', n)
return n
"""

#: the scripts whose records come framed in one argument (``_UNFRAME``, ``calls_for``)
FRAMED = frozenset({"put", "complete"})

#: name -> Lua source (loaded once with SCRIPT LOAD, run with EVALSHA, re-loaded on NOSCRIPT)
SCRIPTS: dict[str, str] = {
    "init": _INIT,
    "put": _PUT,
    "complete": _COMPLETE,
    "requeue": _REQUEUE,
    "delay": _DELAY,
    "load": _LOAD,
    "beat": _BEAT,
    "claim": _CLAIM,
    "release": _RELEASE,
    "report": _REPORT,
    "tally": _TALLY,
    "sums": _SUMS,
    "rate": _RATE,
    "admit": _ADMIT,
    "check": CHECK,
    "read": READ,
}
