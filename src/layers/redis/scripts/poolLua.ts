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
-- A live session other than gone_sid holds the plain lease lk (a writer).
local function pool_writer(lk, holders, gone_sid)
  local sid = redis.call('HGET', lk, 'session')
  return sid ~= false and sid ~= nil and sid ~= gone_sid and alive(holders, sid)
end
-- The permits the holds of lk's pool use and their number; a hold of a gone session (or of gone_sid,
-- a session closing) is dropped and its hash deleted.
local function pool_holds(lk, holders, lease_prefix, gone_sid)
  local used, count = 0, 0
  local all = redis.call('HGETALL', lk .. ':holds')
  for i = 1, #all, 2 do
    local sid, weight = string.match(all[i + 1], '^([^|]+)|(%d+)$')
    if sid ~= gone_sid and alive(holders, sid) then
      used = used + tonumber(weight)
      count = count + 1
    else
      local hk = lease_prefix .. all[i] .. '}'
      redis.call('HDEL', lk .. ':holds', all[i])
      redis.call('DEL', hk, hk .. ':holder')
    end
  end
  return used, count
end
-- lk's pool once the holds and waiters of gone sessions are dropped: {kind, limit}, or nil (its keys
-- deleted) when it has none left.
local function pool_live(lk, holders, lease_prefix, gone_sid)
  local p = redis.call('HMGET', lk .. ':pool', 'kind', 'limit')
  if not p[1] then return nil end
  local _, count = pool_holds(lk, holders, lease_prefix, gone_sid)
  local waiting = 0
  local all = redis.call('HGETALL', lk .. ':pw')
  for i = 1, #all, 2 do
    local sid = string.match(all[i + 1], '^([^|]+)|')
    if sid ~= gone_sid and alive(holders, sid) then
      waiting = waiting + 1
    else
      redis.call('HDEL', lk .. ':pw', all[i])
      redis.call('ZREM', lk .. ':pq', all[i])
    end
  end
  if count == 0 and waiting == 0 then
    redis.call('DEL', lk .. ':pool', lk .. ':holds', lk .. ':pq', lk .. ':pw')
    return nil
  end
  return {kind = p[1], limit = p[2]}
end
local function pool_fits(lk, p, holders, lease_prefix, gone_sid, mode, weight)
  if mode == 'read' then return not pool_writer(lk, holders, gone_sid) end
  local used, count = pool_holds(lk, holders, lease_prefix, gone_sid)
  if mode == 'write' then return count == 0 and not pool_writer(lk, holders, gone_sid) end
  return used + weight <= tonumber(p.limit)
end
-- Queues waiter (once: it keeps its place) in arrival order.
local function pool_wait(lk, waiter, sid, mode, weight)
  if redis.call('HEXISTS', lk .. ':pw', waiter) == 1 then return end
  local seq = redis.call('HINCRBY', lk .. ':pool', 'seq', 1)
  redis.call('ZADD', lk .. ':pq', seq, waiter)
  redis.call('HSET', lk .. ':pw', waiter, sid .. '|' .. mode .. '|' .. weight)
end
-- Grants waiter (of session sid, whose lease set lives keep ms) the next token of lk: a hold's
-- lease hash, or (mode 'write') the plain lease lk itself, with a block of tokens. notify: a hand-off,
-- told on sid's channel ('granted:<token>:<name>') as a plain hand-off is. Answers the token.
local function pool_grant(lk, name, lease_prefix, holders, waiter, sid, mode, weight, block, notify, own, keep)
  local now, us = server_time()
  local home = holder_key(holders, sid)
  if not own then
    own = redis.call('PTTL', home)
    keep = own
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
    hold(lease_prefix .. waiter .. '}', home .. ':leases', waiter, sid, token, now, own, keep, true, nil)
    redis.call('HSET', lk .. ':holds', waiter, sid .. '|' .. weight)
  end
  redis.call('ZREM', lk .. ':pq', waiter)
  redis.call('HDEL', lk .. ':pw', waiter)
  bump(holders, home)
  if notify then redis.call('PUBLISH', home, 'granted:' .. token .. ':' .. granted) end
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
    if not pool_fits(lk, p, holders, lease_prefix, gone_sid, mode, tonumber(weight)) then break end
    pool_grant(lk, name, lease_prefix, holders, head, sid, mode, tonumber(weight), 1, true, nil, nil)
  end
  pool_live(lk, holders, lease_prefix, gone_sid)
end
-- The waiter of lk's pool is granted at once when nobody waits before it and it fits; else queued.
local function pool_enter(lk, name, lease_prefix, holders, p, waiter, sid, mode, weight, block, own, keep)
  local head = redis.call('ZRANGE', lk .. ':pq', 0, 0)[1]
  if (not head or head == waiter) and pool_fits(lk, p, holders, lease_prefix, nil, mode, weight) then
    local token = pool_grant(lk, name, lease_prefix, holders, waiter, sid, mode, weight, block, false, own, keep)
    if block > 1 then return {'granted', token, 0, block} end
    return {'granted', token}
  end
  pool_wait(lk, waiter, sid, mode, weight)
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

