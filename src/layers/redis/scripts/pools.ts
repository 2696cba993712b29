/**
 * Semaphores and read-write locks on Redis, both modes: the scripts of a hold (`acquireHold`, `releaseHold`, `withdrawHold`). The rule is the in-memory
 * store's reference model (`layers/memory/pools.ts`; docs/design.md, "Semaphores and read-write
 * locks"): strict arrival order, the queue's head granted whenever it fits, tokens from the counter
 * of the pool's own lease hash.
 *
 * A pool lives beside the plain lease hash `lk` of its name (so in its slot): `lk:pool` (hash: `kind`,
 * `limit`, `seq`), `lk:holds` (hash: hold name -> `sid|weight`), `lk:pq` (sorted set: waiter ->
 * arrival number) and `lk:pw` (hash: waiter -> `sid|mode|weight`). A waiter is a hold's name, or
 * `~w~<sid>` for a writer (the plain lock of a read-write lock with readers or waiters). A hold is a
 * lease hash of its own, granted, listed by renewals, released and dropped with its session as any
 * lease; hold names never collide with lease names (`~`). Its key is `<prefix>:lease:{<hold name>}`
 * on one node, and in a cluster `<prefix>:lease:{<pool>}~<rest of the hold name>` (tagged by the
 * pool's name, so in the pool's slot: `lease_key` in the prelude), where the session's shadow in
 * that slot lists it as it lists the slot's leases. The pool's keys live while it has live holds or
 * waiters, and are deleted by the first call that finds none.
 *
 * A hand-off (the queue's head granted when the pool changes) is a server-side grant in both modes:
 * on one node into the waiter's session key, told on its session's channel; in a cluster into the
 * waiter's shadow in the pool's slot (kept open while it waits, see `pool_wait`), told on the channel
 * named like the hold's one-node key (`granted:<sid>:<token>`), which the waiter's client hears while
 * it waits. The script of each mode is `defineInModes`' (the cluster's reads the pulses of other slots).
 */
import * as Replies from "../replies.js"
import { defineInModes } from "./define.js"

const holdKeys = ["holdLease", "lease", "holder", "holderLeases", "marker"] as const

/**
 * Grants the hold `holdName` (of the pool `pool`: `mode` `read` or `permits`, `weight` of `limit`) to
 * the session unless another kind or limit holds the pool (`conflict`), a lock-delay runs, or it does
 * not fit or others wait before it (queued: `held`). `holdLease` is the hold's lease hash, `lease` the
 * pool's plain lease hash, `holder`/`holderLeases` where the session is found alive and its lease set:
 * its session key (mode `node`) or its shadow in the pool's slot (mode `cluster`, with `registration`,
 * `homeRemaining`, `pulse` and `margin` as the plain acquire takes them; unused on one node).
 */
const acquireHoldInModes = defineInModes("acquireHold", {
  keys: holdKeys,
  args: [
    "sessionId",
    "holdName",
    "pool",
    "holdMode",
    "weight",
    "limit",
    "mode",
    "holderPrefix",
    "leasePrefix",
    "registration",
    "homeRemaining",
    "pulse",
    "margin",
    "idleMs",
    "delayMs"
  ],
  reply: Replies.Acquired
}, `
local holders = holders_in(mode, holderPrefix, idleMs, marker, delayMs)
local own, keep = session_here(holders, holder, registration, homeRemaining, pulse, margin)
if not own then return {keep} end
local h = redis.call('HMGET', holdLease, 'session', 'token')
local now = now_ms()
if h[1] == sessionId then
  hold(holdLease, holderLeases, holdName, sessionId, h[2], now, own, keep, false, nil)
  return {'granted', h[2]}
end
-- The same request from a new session of its client while the session it left still holds it: the
-- name is taken, as any lease's; never a second holder of one name (not queued either).
if h[1] then
  local left = holder_left(holders, h[1])
  if left ~= -2 then return {'held', h[2] or '', left} end
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
  -- Holds left without their pool's hash (deleted by hand) still count.
  local used, count = pool_holds(lease, holders, leasePrefix, nil)
  p = {kind = kind, limit = limit, used = used, count = count, waiting = 0}
end
-- No token: a new name, or a store that lost its state; nothing is granted while a lock-delay runs.
if not redis.call('HGET', lease, 'token') then
  local pause, fresh = lock_delay(holders, now, redis.call('GET', marker))
  if pause > 0 then
    pool_wait(lease, holdName, sessionId, holdMode, weight, holders)
    return {'delayed', pause, fresh and 1 or 0}
  end
end
return pool_enter(lease, pool, leasePrefix, holders, p, holdName, sessionId, holdMode, tonumber(weight), 1, own, keep)
`)
export const acquireHold = acquireHoldInModes.node
/** `acquireHold` for mode `cluster`, flagged `allow-cross-slot-keys` (it reads pulses of other slots). */
export const acquireHoldInCluster = acquireHoldInModes.cluster

/** Ends the hold if the session holds it with exactly `token`, and serves its pool's queue. */
const releaseHoldInModes = defineInModes("releaseHold", {
  keys: holdKeys,
  args: ["sessionId", "token", "holdName", "mode", "holderPrefix", "leasePrefix", "idleMs", "delayMs"],
  reply: Replies.Count
}, `
local h = redis.call('HMGET', holdLease, 'session', 'token')
if h[1] ~= sessionId or h[2] ~= token then return 0 end
local holders = holders_in(mode, holderPrefix, idleMs, marker, delayMs)
redis.call('SREM', holderLeases, holdName)
changed(holders, holder)
end_hold(holdLease, holdName, leasePrefix, holders, nil)
return 1
`)
export const releaseHold = releaseHoldInModes.node
/** `releaseHold` for mode `cluster`, flagged as `acquireHoldInCluster` is. */
export const releaseHoldInCluster = releaseHoldInModes.cluster

/** The session no longer waits for the hold: it leaves the pool's queue, which is served. */
const withdrawHoldInModes = defineInModes("withdrawHold", {
  keys: ["lease", "marker"],
  args: ["holdName", "pool", "mode", "holderPrefix", "leasePrefix", "idleMs", "delayMs"],
  reply: Replies.Count
}, `
local holders = holders_in(mode, holderPrefix, idleMs, marker, delayMs)
if not pool_unwait(lease, holdName, holders) then return 0 end
pool_serve(lease, pool, leasePrefix, holders, nil)
return 1
`)
export const withdrawHold = withdrawHoldInModes.node
/** `withdrawHold` for mode `cluster`, flagged as `acquireHoldInCluster` is. */
export const withdrawHoldInCluster = withdrawHoldInModes.cluster
