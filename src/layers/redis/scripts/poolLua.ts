/**
 * The pool functions of the Lua prelude (semaphores and read-write locks; their keys, rule and
 * scripts are described in `pools.ts`). A module of its own, without imports: the prelude includes
 * it, and `pools.ts` depends on the prelude through `define`.
 */
export const poolLua = `
-- ---- Pools: semaphores and read-write locks (scripts/pools.ts) ----
local function pool_desc(kind, limit)
  if kind == 'semaphore' then return 'semaphore of ' .. limit .. ' permits' end
  return 'read-write lock'
end
-- The lease prefix of lk, the lease hash of name.
local function prefix_of(lk, name)
  return string.sub(lk, 1, #lk - #name - 1)
end
-- Whether session sid lives, as this script call's pool rules see it. Mode 'node': asked of its
-- session key once per call (a pool rule never writes a session key, and a script's run sees the
-- server's time frozen), not once per hold and waiter at every look at the pool.
local pool_alive_known = {}
local function pool_alive(holders, sid)
  if holders.mode ~= 'node' then return alive(holders, sid) end
  local known = pool_alive_known[sid]
  if known == nil then
    known = alive(holders, sid)
    pool_alive_known[sid] = known
  end
  return known
end
-- A live session other than gone_sid holds the plain lease lk (a writer).
local function pool_writer(lk, holders, gone_sid)
  local sid = redis.call('HGET', lk, 'session')
  return sid ~= false and sid ~= nil and sid ~= gone_sid and pool_alive(holders, sid)
end
-- The permits the holds of lk's pool use and their number; a hold of a gone session (or of gone_sid,
-- a session closing) is dropped and its hash deleted.
local function pool_holds(lk, holders, lease_prefix, gone_sid)
  local used, count = 0, 0
  local all = redis.call('HGETALL', lk .. ':holds')
  for i = 1, #all, 2 do
    local sid, weight = string.match(all[i + 1], '^([^|]+)|(%d+)$')
    if sid ~= gone_sid and pool_alive(holders, sid) then
      used = used + tonumber(weight)
      count = count + 1
    else
      local hk = lease_key(lease_prefix, all[i], holders.mode == 'cluster')
      redis.call('HDEL', lk .. ':holds', all[i])
      redis.call('DEL', hk, hk .. ':holder')
    end
  end
  return used, count
end
-- lk's pool has neither holds nor waiters left: its keys go.
local function pool_drop(lk)
  redis.call('DEL', lk .. ':pool', lk .. ':holds', lk .. ':pq', lk .. ':pw')
end
-- lk's pool once the holds and waiters of gone sessions are dropped, or nil (its keys deleted) when it
-- has none left: {kind, limit, used (permits of the live holds), count (live holds), waiting (live
-- waiters)}. A call reads the pool once: the pool rules keep used, count and waiting as they grant
-- and unqueue (pool_grant, pool_serve), since nothing else in the call changes them (the sessions'
-- liveness is frozen within it).
local function pool_live(lk, holders, lease_prefix, gone_sid)
  local p = redis.call('HMGET', lk .. ':pool', 'kind', 'limit')
  if not p[1] then return nil end
  local used, count = pool_holds(lk, holders, lease_prefix, gone_sid)
  local waiting = 0
  local all = redis.call('HGETALL', lk .. ':pw')
  for i = 1, #all, 2 do
    local sid = string.match(all[i + 1], '^([^|]+)|')
    if sid ~= gone_sid and pool_alive(holders, sid) then
      waiting = waiting + 1
    else
      redis.call('HDEL', lk .. ':pw', all[i])
      redis.call('ZREM', lk .. ':pq', all[i])
    end
  end
  if count == 0 and waiting == 0 then
    pool_drop(lk)
    return nil
  end
  return {kind = p[1], limit = p[2], used = used, count = count, waiting = waiting}
end
-- Whether a request of mode and weight fits lk's pool p (as pool_live made it, kept since).
local function pool_fits(lk, p, holders, gone_sid, mode, weight)
  if mode == 'read' then return not pool_writer(lk, holders, gone_sid) end
  if mode == 'write' then return p.count == 0 and not pool_writer(lk, holders, gone_sid) end
  return p.used + weight <= tonumber(p.limit)
end
-- Queues waiter (once: it keeps its place) in arrival order. Mode 'cluster': the session's shadow
-- in this slot counts its waits ('waits'), so that a renewal does not close a shadow holding no lease
-- while a hand-off may still grant into it (see renewSlot); pool_unwait counts them down.
local function pool_wait(lk, waiter, sid, mode, weight, holders)
  if redis.call('HEXISTS', lk .. ':pw', waiter) == 1 then return end
  local seq = redis.call('HINCRBY', lk .. ':pool', 'seq', 1)
  redis.call('ZADD', lk .. ':pq', seq, waiter)
  redis.call('HSET', lk .. ':pw', waiter, sid .. '|' .. mode .. '|' .. weight)
  if holders.mode == 'cluster' then
    local shadow = holder_key(holders, sid)
    if redis.call('EXISTS', shadow) == 1 then redis.call('HINCRBY', shadow, 'waits', 1) end
  end
end
-- waiter leaves lk's queue (granted or withdrawn); false when it was not in it.
local function pool_unwait(lk, waiter, holders)
  local entry = redis.call('HGET', lk .. ':pw', waiter)
  if not entry then return false end
  redis.call('HDEL', lk .. ':pw', waiter)
  redis.call('ZREM', lk .. ':pq', waiter)
  if holders.mode == 'cluster' then
    -- Never on a missing shadow (HINCRBY would make one: a revival).
    local shadow = holder_key(holders, string.match(entry, '^([^|]+)|'))
    if tonumber(redis.call('HGET', shadow, 'waits') or '0') > 0 then redis.call('HINCRBY', shadow, 'waits', -1) end
  end
  return true
end
-- Grants waiter (of session sid, whose lease set lives keep ms) the next token of lk: a hold's
-- lease hash, or (mode 'write') the plain lease lk itself, with a block of tokens. notify: a hand-off,
-- told on sid's channel ('granted:<token>:<name>') as a plain hand-off is (mode 'node'), or on the
-- channel named like the lease's key on one node ('granted:<sid>:<token>', mode 'cluster', where
-- sessions have no channel: the waiter's client hears it while it waits). queued: the waiter is in
-- the pool's queue, which it leaves. Keeps the pool p's counts (see pool_live). Answers the token.
local function pool_grant(lk, name, lease_prefix, holders, p, waiter, sid, mode, weight, block, notify, queued, own, keep)
  local now, us = server_time()
  -- The session key (mode 'node'), or its shadow in this slot, which lists the grant for renewals.
  local home = holder_key(holders, sid)
  if not own then
    own = holder_left(holders, sid)
    keep = redis.call('PTTL', home)
  end
  local stored = redis.call('HGET', lk, 'token')
  local token, granted
  if mode == 'write' then
    token = next_token(stored, us, block - 1)
    granted = name
    hold(lk, home .. ':leases', name, sid, token, now, own, keep, true, block > 1)
  else
    token = next_token(stored, us, 0)
    granted = waiter
    redis.call('HSET', lk, 'token', token)
    -- lk only counts here: a free hash expires once idle, as a freed lease's does.
    if not redis.call('HGET', lk, 'session') then redis.call('PEXPIRE', lk, holders.idle) end
    hold(lease_key(lease_prefix, waiter, holders.mode == 'cluster'), home .. ':leases', waiter, sid, token, now, own, keep, true, nil)
    redis.call('HSET', lk .. ':holds', waiter, sid .. '|' .. weight)
    p.used = p.used + weight
    p.count = p.count + 1
  end
  if queued and pool_unwait(lk, waiter, holders) then p.waiting = p.waiting - 1 end
  bump(holders, home)
  if notify then
    if holders.mode == 'node' then
      redis.call('PUBLISH', home, 'granted:' .. token .. ':' .. granted)
    else
      redis.call('PUBLISH', lease_prefix .. granted .. '}', 'granted:' .. sid .. ':' .. token)
    end
  end
  return token
end
-- Grants the queue's head of lk's pool while it fits (see pool_grant), then deletes a pool left empty.
local function pool_serve(lk, name, lease_prefix, holders, gone_sid)
  local p = pool_live(lk, holders, lease_prefix, gone_sid)
  if not p then return end
  while true do
    local head = redis.call('ZRANGE', lk .. ':pq', 0, 0)[1]
    if not head then break end
    local sid, mode, weight = string.match(redis.call('HGET', lk .. ':pw', head), '^([^|]+)|(%a+)|(%d+)$')
    if mode ~= 'write' and redis.call('HEXISTS', lease_key(lease_prefix, head, holders.mode == 'cluster'), 'session') == 1 then
      -- A hold name another session of its client took meanwhile (see acquireHold): not twice.
      if pool_unwait(lk, head, holders) then p.waiting = p.waiting - 1 end
    elseif pool_fits(lk, p, holders, gone_sid, mode, tonumber(weight)) then
      pool_grant(lk, name, lease_prefix, holders, p, head, sid, mode, tonumber(weight), 1, true, true, nil, nil)
    else
      break
    end
  end
  if p.count == 0 and p.waiting == 0 then pool_drop(lk) end
end
-- The waiter of lk's pool is granted at once when nobody waits before it and it fits; else queued.
-- A head granted by its own call (the queue waited out a lock-delay) lets those behind it go on.
local function pool_enter(lk, name, lease_prefix, holders, p, waiter, sid, mode, weight, block, own, keep)
  local head = redis.call('ZRANGE', lk .. ':pq', 0, 0)[1]
  if (not head or head == waiter) and pool_fits(lk, p, holders, nil, mode, weight) then
    local token = pool_grant(lk, name, lease_prefix, holders, p, waiter, sid, mode, weight, block, false, head == waiter, own, keep)
    if head then pool_serve(lk, name, lease_prefix, holders, nil) end
    if block > 1 then return {'granted', token, 0, block} end
    return {'granted', token}
  end
  pool_wait(lk, waiter, sid, mode, weight, holders)
  return {'held', redis.call('HGET', lk, 'token') or '', -1}
end
-- A plain acquire of lk (name) while its pool exists: a writer of the read-write lock takes its turn
-- in the pool's queue; a semaphore's name refuses it. nil: no live pool, the plain rule applies.
local function acquire_write(lk, name, sid, own, keep, holders, block)
  local lease_prefix = prefix_of(lk, name)
  local p = pool_live(lk, holders, lease_prefix, nil)
  if not p then return nil end
  if p.kind == 'semaphore' then return {'conflict', pool_desc(p.kind, p.limit), 'lock'} end
  return pool_enter(lk, name, lease_prefix, holders, p, '~w~' .. sid, sid, 'write', 1, block, own, keep)
end
-- A hold of sid's session ends (released, or the session closing): its hash goes, its pool is served.
local function end_hold(hk, hname, lease_prefix, holders, gone_sid)
  local at = string.find(hname, '~', 1, true)
  local pool = string.sub(hname, 1, at - 1)
  local lk = lease_prefix .. pool .. '}'
  redis.call('HDEL', lk .. ':holds', hname)
  redis.call('DEL', hk, hk .. ':holder')
  pool_serve(lk, pool, lease_prefix, holders, gone_sid)
end
`

