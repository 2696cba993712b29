/**
 * Semaphores and read-write locks on Redis (mode `node`): the scripts of a hold (`acquireHold`, `releaseHold`, `withdrawHold`). The rule is the in-memory
 * store's reference model (`layers/memory/pools.ts`; docs/design.md, "Semaphores and read-write
 * locks"): strict arrival order, the queue's head granted whenever it fits, tokens from the counter
 * of the pool's own lease hash.
 *
 * A pool lives beside the plain lease hash `lk` of its name (so in its slot): `lk:pool` (hash: `kind`,
 * `limit`, `seq`), `lk:holds` (hash: hold name -> `sid|weight`), `lk:pq` (sorted set: waiter ->
 * arrival number) and `lk:pw` (hash: waiter -> `sid|mode|weight`). A waiter is a hold's name, or
 * `~w~<sid>` for a writer (the plain lock of a read-write lock with readers or waiters). A hold is a
 * lease hash of its own (`<prefix>:lease:{<hold name>}`), granted, listed by renewals, released and
 * dropped with its session as any lease; hold names never collide with lease names (`~`). The pool's
 * keys live while it has live holds or waiters, and are deleted by the first call that finds none.
 */
import * as Replies from "../replies.js"
import { define } from "./define.js"


const holdKeys = ["holdLease", "lease", "holder", "holderLeases", "marker"] as const

/**
 * Grants the hold `holdName` (of the pool `pool`: `mode` `read` or `permits`, `weight` of `limit`) to
 * the session unless another kind or limit holds the pool (`conflict`), a lock-delay runs, or it does
 * not fit or others wait before it (queued: `held`). `holdLease` is the hold's lease hash, `lease` the
 * pool's plain lease hash, `holder`/`holderLeases` the session key and its lease set.
 */
export const acquireHold = define("acquireHold", {
  keys: holdKeys,
  args: ["sessionId", "holdName", "pool", "holdMode", "weight", "limit", "holderPrefix", "leasePrefix", "idleMs", "delayMs"],
  reply: Replies.Acquired
}, `
local holders = holders_in('node', holderPrefix, idleMs, marker, delayMs)
local own = redis.call('PTTL', holder)
if own == -2 then return {'expired'} end
local h = redis.call('HMGET', holdLease, 'session', 'token')
local now = now_ms()
if h[1] == sessionId then
  hold(holdLease, holderLeases, holdName, sessionId, h[2], now, own, own, false, nil)
  return {'granted', h[2]}
end
local kind = 'semaphore'
if holdMode == 'read' then kind = 'rw' end
local asked = pool_desc(kind, limit)
local p = pool_live(lease, holders, leasePrefix, nil)
if p then
  if p.kind ~= kind or (kind == 'semaphore' and p.limit ~= limit) then
    return {'conflict', pool_desc(p.kind, p.limit), asked}
  end
else
  if kind == 'semaphore' and pool_writer(lease, holders, nil) then return {'conflict', 'lock', asked} end
  redis.call('HSET', lease .. ':pool', 'kind', kind, 'limit', limit)
  p = {kind = kind, limit = limit}
end
-- No token: a new name, or a store that lost its state; nothing is granted while a lock-delay runs.
if not redis.call('HGET', lease, 'token') then
  local pause, fresh = lock_delay(holders, now, redis.call('GET', marker))
  if pause > 0 then
    pool_wait(lease, holdName, sessionId, holdMode, weight)
    return {'delayed', pause, fresh and 1 or 0}
  end
end
return pool_enter(lease, pool, leasePrefix, holders, p, holdName, sessionId, holdMode, tonumber(weight), 1, own, own)
`)

/** Ends the hold if the session holds it with exactly `token`, and serves its pool's queue. */
export const releaseHold = define("releaseHold", {
  keys: holdKeys,
  args: ["sessionId", "token", "holdName", "holderPrefix", "leasePrefix", "idleMs", "delayMs"],
  reply: Replies.Count
}, `
local h = redis.call('HMGET', holdLease, 'session', 'token')
if h[1] ~= sessionId or h[2] ~= token then return 0 end
local holders = holders_in('node', holderPrefix, idleMs, marker, delayMs)
redis.call('SREM', holderLeases, holdName)
changed(holders, holder)
end_hold(holdLease, holdName, leasePrefix, holders, nil)
return 1
`)

/** The session no longer waits for the hold: it leaves the pool's queue, which is served. */
export const withdrawHold = define("withdrawHold", {
  keys: ["lease", "marker"],
  args: ["holdName", "pool", "holderPrefix", "leasePrefix", "idleMs", "delayMs"],
  reply: Replies.Count
}, `
if redis.call('HDEL', lease .. ':pw', holdName) == 0 then return 0 end
redis.call('ZREM', lease .. ':pq', holdName)
pool_serve(lease, pool, leasePrefix, holders_in('node', holderPrefix, idleMs, marker, delayMs), nil)
return 1
`)
