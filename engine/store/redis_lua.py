"""The Lua scripts of the Redis store: each write is one script, so it is atomic.

Redis runs a script alone (no other command interleaves), which is what SQLite's
``BEGIN IMMEDIATE`` gives the embedded store: the claim of R37 reads the marker and
takes the task in one step, so of N concurrent claims from any number of daemons
exactly one wins.

Every script starts with `PRELUDE` and receives the key prefix as ``ARGV[1]``. Keys
(``P`` is the prefix):

- ``P t:<sid>:<hash>``  hash of a pending task: ``body`` (JSON of the fields a claim
  never changes), ``snap`` (JSON snapshot, absent for none), ``state``, ``created``,
  ``updated``, ``origin``, ``resumed`` (absent for none);
- ``P ts:<sid>``  zset of the session's task hashes by ``created_at``;
- ``P tasks`` / ``P parked`` / ``P o:<origin>``  zsets of ``<hash>\\n<sid>`` by
  ``created_at``: every task, the parked ones, those of one origin;
- ``P markers``  zset of marker names by ``expires_at`` (the truth of liveness), and
  ``P m:<name>`` a string holding ``expires_at`` with a Redis TTL (garbage collection
  and operator visibility, see `agentrio.engine.store.redis_store`);
- ``P latest``  hash session -> latest task hash (the sessions table, R36);
- ``P hrow:<sid>`` hash hash -> history JSON; ``P hz:<sid>`` zset of
  ``<seq>:<hash>`` by ``end_at`` (ties: the later written first); ``P hidx:<sid>``
  hash hash -> its zset member; ``P hseq`` the write sequence;
- ``P s:<sid>`` hash of secrets; ``P n:history`` / ``P n:secrets`` counters;
- ``P rules`` hash rule id -> JSON of the home's remembered rule (R92).

The scripts name keys they build from the prefix rather than declaring them all in
``KEYS``: fine on one Redis server (and behind Sentinel), not on Redis Cluster.
"""

from __future__ import annotations

from typing import Final

__all__ = [
    "ADD_HISTORY",
    "CLAIM",
    "DELETE_MARKER",
    "DELETE_RULES",
    "DELETE_TASK",
    "END_RUN",
    "HISTORY_PAGE",
    "LIST_ROWS",
    "PURGE_MARKERS",
    "PUT_SECRET",
    "PUT_TASK",
    "SET_MARKER",
    "STATISTICS",
]

PRELUDE: Final = r"""
local P = ARGV[1]
local function tkey(sid, h) return P .. 't:' .. sid .. ':' .. h end
local function mname(sid, h) return 'action:' .. sid .. ':' .. h end
local function alive(name, now)
  local s = redis.call('ZSCORE', P .. 'markers', name)
  return s ~= false and s ~= nil and tonumber(s) > tonumber(now)
end
local function set_marker(name, exp, gc_ms)
  redis.call('ZADD', P .. 'markers', exp, name)
  if gc_ms ~= '' then
    redis.call('SET', P .. 'm:' .. name, exp, 'PXAT', gc_ms)
  else
    redis.call('SET', P .. 'm:' .. name, exp)
  end
end
local function del_marker(name)
  redis.call('ZREM', P .. 'markers', name)
  redis.call('DEL', P .. 'm:' .. name)
end
local function unindex(sid, h)
  local k = tkey(sid, h)
  local origin = redis.call('HGET', k, 'origin')
  if not origin then return false end
  local m = h .. '\n' .. sid
  redis.call('ZREM', P .. 'ts:' .. sid, h)
  redis.call('ZREM', P .. 'tasks', m)
  redis.call('ZREM', P .. 'parked', m)
  redis.call('ZREM', P .. 'o:' .. origin, m)
  redis.call('DEL', k)
  return true
end
local function put(sid, h, body, snap, state, created, updated, origin, resumed)
  unindex(sid, h)
  local k = tkey(sid, h)
  redis.call('HSET', k, 'body', body, 'state', state, 'created', created,
             'updated', updated, 'origin', origin)
  if snap ~= '' then redis.call('HSET', k, 'snap', snap) end
  if resumed ~= '' then redis.call('HSET', k, 'resumed', resumed) end
  local m = h .. '\n' .. sid
  redis.call('ZADD', P .. 'ts:' .. sid, created, h)
  redis.call('ZADD', P .. 'tasks', created, m)
  if state == 'parked' then redis.call('ZADD', P .. 'parked', created, m) end
  redis.call('ZADD', P .. 'o:' .. origin, created, m)
end
local function add_history(sid, h, json, end_at)
  local idx = P .. 'hidx:' .. sid
  local old = redis.call('HGET', idx, h)
  if old then
    redis.call('ZREM', P .. 'hz:' .. sid, old)
  else
    redis.call('INCR', P .. 'n:history')
  end
  local seq = redis.call('INCR', P .. 'hseq')
  local member = string.format('%020d', seq) .. ':' .. h
  redis.call('HSET', idx, h, member)
  redis.call('ZADD', P .. 'hz:' .. sid, end_at, member)
  redis.call('HSET', P .. 'hrow:' .. sid, h, json)
  unindex(sid, h)
end
local function row(sid, h, want_snap, now)
  local k = tkey(sid, h)
  local f = redis.call('HMGET', k, 'body', 'state', 'created', 'updated', 'resumed', 'snap',
                       'origin')
  if not f[1] then return false end
  local snap = false
  if want_snap == '1' then snap = f[6] end
  local live = '0'
  if now ~= '' and alive(mname(sid, h), now) then live = '1' end
  return {sid, h, f[1], f[2], f[3], f[4], f[5] or '', snap or '', live, f[7]}
end
"""

#: ARGV: P, sid, hash, body, snap, state, created, updated, origin, resumed,
#: marker expires_at ('' for none), marker gc ms, latest ('1'/'0').
PUT_TASK: Final = (
    PRELUDE
    + r"""
local sid, h = ARGV[2], ARGV[3]
put(sid, h, ARGV[4], ARGV[5], ARGV[6], ARGV[7], ARGV[8], ARGV[9], ARGV[10])
if ARGV[11] ~= '' then set_marker(mname(sid, h), ARGV[11], ARGV[12]) end
if ARGV[13] == '1' then redis.call('HSET', P .. 'latest', sid, h) end
return 1
"""
)

#: ARGV: P, sid, hash. Returns 1 when a row was deleted.
DELETE_TASK: Final = (
    PRELUDE
    + r"""
if unindex(ARGV[2], ARGV[3]) then return 1 end
return 0
"""
)

#: ARGV: P, sid, hash, now, expires_at, gc ms, new hash ('' for none).
#: Returns {status, final hash, row fields…}; status ok | conflict | notfound | taken.
CLAIM: Final = (
    PRELUDE
    + r"""
local sid, h, now, exp, gc, new_h = ARGV[2], ARGV[3], ARGV[4], ARGV[5], ARGV[6], ARGV[7]
local k = tkey(sid, h)
local live = alive(mname(sid, h), now)
if redis.call('EXISTS', k) == 0 then
  if live then return {'conflict'} end
  return {'notfound'}
end
if live then return {'conflict'} end
local final = h
if new_h ~= '' and new_h ~= h then
  if redis.call('EXISTS', tkey(sid, new_h)) == 1 then return {'taken'} end
  local f = redis.call('HMGET', k, 'body', 'snap', 'created', 'origin')
  put(sid, new_h, f[1], f[2] or '', 'running', f[3], now, f[4], h)
  unindex(sid, h)
  set_marker(mname(sid, new_h), exp, gc)
  final = new_h
else
  redis.call('HSET', k, 'state', 'running', 'updated', now)
  redis.call('ZREM', P .. 'parked', h .. '\n' .. sid)
end
set_marker(mname(sid, h), exp, gc)
local r = row(sid, final, '1', '')
return {'ok', unpack(r)}
"""
)

#: ARGV: P, name, expires_at, gc ms.
SET_MARKER: Final = PRELUDE + "set_marker(ARGV[2], ARGV[3], ARGV[4])\nreturn 1\n"

#: ARGV: P, name.
DELETE_MARKER: Final = PRELUDE + "del_marker(ARGV[2])\nreturn 1\n"

#: ARGV: P, now. Returns how many markers were deleted.
PURGE_MARKERS: Final = (
    PRELUDE
    + r"""
local names = redis.call('ZRANGEBYSCORE', P .. 'markers', '-inf', ARGV[2])
for _, name in ipairs(names) do del_marker(name) end
return #names
"""
)

#: ARGV: P, sid, hash, history JSON, end_at.
ADD_HISTORY: Final = PRELUDE + "add_history(ARGV[2], ARGV[3], ARGV[4], ARGV[5])\nreturn 1\n"

#: ARGV: P, sid, hash (whose marker goes), has history ('1'/'0'), its sid, hash, JSON,
#: end_at, has keep ('1'/'0'), its sid, hash, body, snap, state, created, updated,
#: origin, resumed.
END_RUN: Final = (
    PRELUDE
    + r"""
if ARGV[4] == '1' then add_history(ARGV[5], ARGV[6], ARGV[7], ARGV[8]) end
if ARGV[9] == '1' then
  put(ARGV[10], ARGV[11], ARGV[12], ARGV[13], ARGV[14], ARGV[15], ARGV[16], ARGV[17],
      ARGV[18])
end
del_marker(mname(ARGV[2], ARGV[3]))
return 1
"""
)

#: ARGV: P, mode (task | session | parked | origin), name, want snapshot ('1'/'0'), now
#: ('' for no marker check), task hash (mode task). Returns the rows (see ``row`` in
#: `PRELUDE`), oldest created first.
LIST_ROWS: Final = (
    PRELUDE
    + r"""
local mode, name, want, now = ARGV[2], ARGV[3], ARGV[4], ARGV[5]
local out = {}
if mode == 'task' then
  local r = row(name, ARGV[6], want, now)
  if r then out[1] = r end
  return out
end
if mode == 'session' then
  for _, h in ipairs(redis.call('ZRANGE', P .. 'ts:' .. name, 0, -1)) do
    local r = row(name, h, want, now)
    if r then out[#out + 1] = r end
  end
  return out
end
local index = P .. 'parked'
if mode == 'origin' then index = P .. 'o:' .. name end
for _, m in ipairs(redis.call('ZRANGE', index, 0, -1)) do
  local cut = string.find(m, '\n', 1, true)
  local r = row(string.sub(m, cut + 1), string.sub(m, 1, cut - 1), want, now)
  if r then out[#out + 1] = r end
end
return out
"""
)

#: ARGV: P, sid, start rank, stop rank. Returns history JSON rows, newest first.
HISTORY_PAGE: Final = (
    PRELUDE
    + r"""
local sid = ARGV[2]
local members = redis.call('ZREVRANGE', P .. 'hz:' .. sid, ARGV[3], ARGV[4])
if #members == 0 then return {} end
local hashes = {}
for i, m in ipairs(members) do hashes[i] = string.sub(m, 22) end
return redis.call('HMGET', P .. 'hrow:' .. sid, unpack(hashes))
"""
)

#: ARGV: P, sid, key, value. Never logged: the value is a secret (R73).
PUT_SECRET: Final = (
    PRELUDE
    + r"""
if redis.call('HSET', P .. 's:' .. ARGV[2], ARGV[3], ARGV[4]) == 1 then
  redis.call('INCR', P .. 'n:secrets')
end
return 1
"""
)

#: ARGV: P, rule id or ``all``. Returns the JSON of each rule removed.
DELETE_RULES: Final = (
    PRELUDE
    + r"""
local key = P .. 'rules'
if ARGV[2] == 'all' then
  local all = redis.call('HVALS', key)
  redis.call('DEL', key)
  return all
end
local body = redis.call('HGET', key, ARGV[2])
if not body then return {} end
redis.call('HDEL', key, ARGV[2])
return {body}
"""
)

#: ARGV: P, now. Returns {tasks, history, live markers, secrets}.
STATISTICS: Final = (
    PRELUDE
    + r"""
return {
  redis.call('ZCARD', P .. 'tasks'),
  tonumber(redis.call('GET', P .. 'n:history') or '0'),
  redis.call('ZCOUNT', P .. 'markers', '(' .. ARGV[2], '+inf'),
  tonumber(redis.call('GET', P .. 'n:secrets') or '0'),
}
"""
)
