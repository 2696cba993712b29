/**
 * The scripts of one lease, the same in both modes: acquire, release, withdraw from its queue, and
 * the boot marker that starts a lock-delay after lost state. Where the holder is found alive (its
 * session key, or its shadow in the lease's slot) comes in as keys and the mode as an argument.
 */
import * as Replies from "../replies.js"
import { define, defineInModes } from "./define.js"

const acquireParams = {
  keys: ["lease", "queue", "holder", "holderLeases", "marker"],
  args: [
    "sessionId",
    "name",
    "mode",
    "holderPrefix",
    "registration",
    "homeRemaining",
    "pulse",
    "margin",
    "idleMs",
    "delayMs",
    "block"
  ],
  reply: Replies.Acquired
} as const
const acquireBody = `
local holders = holders_in(mode, holderPrefix, idleMs, marker, delayMs)
local own, keep = session_here(holders, holder, registration, homeRemaining, pulse, margin)
if not own then return {keep} end
return acquire(lease, queue, holderLeases, sessionId, name, own, keep, holders, tonumber(block))
`
/**
 * Grants the lease unless a live session holds it or it is reserved for another live waiter; a
 * refused session joins the queue. `holder` is where the session is found alive in the lease's slot
 * and `holderLeases` the set of the names it holds there: its session key and `:leases` (mode
 * `node`; `registration`, `homeRemaining`, `pulse` and `margin` unused), or its shadow there (mode
 * `cluster`, with the registration number and the home's time left that `register` answered, the
 * session's pulse on the slot's node and the shadow's margin; see `acquireInCluster`).
 */
const acquireInModes = defineInModes("acquire", acquireParams, acquireBody)
export const acquire = acquireInModes.node
/**
 * `acquire` for mode `cluster`, flagged `allow-cross-slot-keys` (Redis 7): the pulses of the holder
 * and of the waiters are keys of other slots of the same node.
 */
export const acquireInCluster = acquireInModes.cluster

/**
 * Releases the lease if the session holds it with exactly `token`, and hands it off (see `acquire`;
 * `holder` and `holderLeases` as there).
 */
const releaseParams = {
  keys: ["lease", "queue", "holder", "holderLeases", "marker"],
  args: ["sessionId", "token", "name", "mode", "holderPrefix", "idleMs", "delayMs"],
  reply: Replies.Count
} as const
const releaseBody = `
local h = redis.call('HMGET', lease, 'session', 'token', 'queued')
if not h[1] and not h[2] then
  -- The hash was deleted by hand while its holder record names this session and token: the release
  -- still ends that lease. The hash comes back free with its token (the floor of the next grant), so
  -- a later acquire, this session's too, is a new grant with a higher token, never the ended term's.
  local rsid, rtok = recorded_holder(redis.call('GET', lease .. ':holder'))
  if rsid ~= sessionId or rtok ~= token then return 0 end
  local holders = holders_in(mode, holderPrefix, idleMs, marker, delayMs)
  redis.call('HSET', lease, 'token', rtok)
  free(lease, holders)
  redis.call('SREM', holderLeases, name)
  changed(holders, holder)
  redis.call('PUBLISH', lease, 'released')
  return 1
end
if h[1] ~= sessionId or h[2] ~= token then return 0 end
local holders = holders_in(mode, holderPrefix, idleMs, marker, delayMs)
redis.call('SREM', holderLeases, name)
changed(holders, holder)
hand_off(lease, queue, name, holders, h[2], h[3], true)
return 1
`
const releaseInModes = defineInModes("release", releaseParams, releaseBody)
export const release = releaseInModes.node
/** `release` for mode `cluster`, flagged as `acquireInCluster` is. */
export const releaseInCluster = releaseInModes.cluster

/**
 * The session no longer waits for the lease: it leaves the queue; a reservation it had on the free
 * lease is handed to the next live waiter (`holder*` as in `acquire`, to find waiters alive).
 */
const withdrawParams = {
  keys: ["lease", "queue", "marker"],
  args: ["sessionId", "name", "mode", "holderPrefix", "idleMs", "delayMs"],
  reply: Replies.Count
} as const
const withdrawBody = `
local removed = redis.call('ZREM', queue, sessionId)
-- A writer waiting in the pool of a read-write lock leaves it; the pool's queue goes on.
if redis.call('HEXISTS', lease .. ':pw', '~w~' .. sessionId) == 1 then
  local holders = holders_in(mode, holderPrefix, idleMs, marker, delayMs)
  pool_unwait(lease, '~w~' .. sessionId, holders)
  pool_serve(lease, name, prefix_of(lease, name), holders, nil)
end
local h = redis.call('HMGET', lease, 'session', 'reserved', 'token', 'queued')
if h[2] == sessionId then
  redis.call('HDEL', lease, 'reserved', 'reservedUntil')
  if not h[1] then hand_off(lease, queue, name, holders_in(mode, holderPrefix, idleMs, marker, delayMs), h[3], h[4], false) end
end
return removed
`
const withdrawInModes = defineInModes("withdraw", withdrawParams, withdrawBody)
export const withdraw = withdrawInModes.node
/** `withdraw` for mode `cluster`, flagged as `acquireInCluster` is. */
export const withdrawInCluster = withdrawInModes.cluster

/**
 * Creates the boot marker (of the store, or of one slot) unless it exists, with grants resuming at
 * `resumeAt` (server ms; set by the first marker of the same node in one pass, so the whole node
 * resumes at once) or, when `resumeAt` is `""`, after a full `delayMs`. Answers 1 when it created it,
 * and the marker's value.
 */
export const bootMarker = define("bootMarker", {
  keys: ["marker"],
  args: ["delayMs", "resumeAt"],
  reply: Replies.Marked
}, `
local resume = redis.call('GET', marker)
if resume then return {0, resume} end
if resumeAt ~= '' then resume = resumeAt else resume = tostring(now_ms() + tonumber(delayMs)) end
redis.call('SET', marker, resume)
return {1, resume}
`)
