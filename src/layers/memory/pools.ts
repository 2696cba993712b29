/**
 * Semaphores and read-write locks in the in-memory store: the reference model of the pool rule every
 * store implements (docs/design.md, "Semaphores and read-write locks").
 *
 * - A hold (`LeaseName.Hold`) is a lease of its own session, named by `LeaseName.holdName`: renewed,
 *   listed, released and dropped with its session as any lease. Its token comes from the counter of
 *   the pool's own name (the plain lease `pool`), so every grant of a pool, hold or write lock, gets a
 *   token above every earlier one.
 * - Grants are strictly in arrival order: a request is granted at once only when nobody waits before
 *   it and it fits; otherwise it queues. Whenever a pool changes (a release, a session gone, a
 *   withdrawal), `serve` grants the queue's head while it fits and pushes `Granted` to each, so a
 *   3-permit request is never passed by 1-permit ones and a writer never by later readers.
 * - Fits: a semaphore's held permits plus the request's stay within `limit`; a read hold while no
 *   writer holds the plain lease; a writer (the plain lock) while nobody holds anything.
 * - The pool, with its kind and limit, lives while it has holds or waiters; a request of another kind
 *   or limit is answered `Conflict`.
 */
import * as HashMap from "effect/HashMap"
import * as Option from "effect/Option"
import type * as LeaseName from "../../LeaseName.js"
import { AcquireReply, Hint } from "../../LeaseBackend.js"
import { grantLease, type Pool, remainingOf, type Session, type State, type Step, type Waiter } from "./state.js"

const describe = (kind: Pool["kind"], limit: number): string =>
  kind === "semaphore" ? `semaphore of ${limit} permits` : "read-write lock"

const kindOf = (hold: LeaseName.Hold): Pool["kind"] => hold.mode === "read" ? "rw" : "semaphore"

const used = (pool: Pool): number => {
  let sum = 0
  for (const [, weight] of pool.holds) sum += weight
  return sum
}

const writerHolds = (state: State, poolName: string): boolean =>
  Option.match(HashMap.get(state.leases, poolName), { onNone: () => false, onSome: (lease) => lease.holder !== undefined })

const fits = (state: State, poolName: string, pool: Pool, waiter: Pick<Waiter, "mode" | "weight">): boolean => {
  switch (waiter.mode) {
    case "permits":
      return used(pool) + waiter.weight <= pool.limit
    case "read":
      return !writerHolds(state, poolName)
    case "write":
      return HashMap.size(pool.holds) === 0 && !writerHolds(state, poolName)
  }
}

const tokenAfter = (state: State, poolName: string): bigint =>
  Option.match(HashMap.get(state.leases, poolName), { onNone: () => 1n, onSome: (lease) => lease.token + 1n })

const savePool = (state: State, poolName: string, pool: Pool): State => ({
  ...state,
  pools: HashMap.size(pool.holds) === 0 && pool.queue.length === 0
    ? HashMap.remove(state.pools, poolName)
    : HashMap.set(state.pools, poolName, pool)
})

/** Grants `waiter` the next token of `poolName`: a hold, or (a writer) the plain lease itself. */
const grant = (
  state: State,
  poolName: string,
  pool: Pool,
  waiter: Waiter,
  session: Session
): readonly [State, Pool, bigint] => {
  const token = tokenAfter(state, poolName)
  if (waiter.mode === "write") return [grantLease(state, waiter.session, session, poolName, token), pool, token]
  const granted = grantLease(state, waiter.session, session, waiter.name, token)
  // The pool's own name keeps the counter (its plain lease is free: a hold was granted).
  const counter = { holder: undefined, token }
  return [
    { ...granted, leases: HashMap.set(granted.leases, poolName, counter) },
    { ...pool, holds: HashMap.set(pool.holds, waiter.name, waiter.weight) },
    token
  ]
}

/** Grants the queue's head while it fits (dropping waiters whose session is gone); pushes `Granted`. */
export const serve = (state: State, poolName: string): readonly [State, Array<Hint>] => {
  const found = HashMap.get(state.pools, poolName)
  if (Option.isNone(found)) return [state, []]
  let pool: Pool = { ...found.value, queue: found.value.queue.filter((w) => HashMap.has(state.sessions, w.session)) }
  let next = state
  const hints: Array<Hint> = []
  while (pool.queue.length > 0) {
    const head = pool.queue[0]!
    // A hold name another session of its client took meanwhile (see `acquireHold`): not twice.
    if (head.mode !== "write" && Option.isSome(HashMap.get(next.leases, head.name))) {
      pool = { ...pool, queue: pool.queue.slice(1) }
      continue
    }
    if (!fits(next, poolName, pool, head)) break
    const session = Option.getOrThrow(HashMap.get(next.sessions, head.session))
    const [granted, changed, token] = grant(next, poolName, pool, head, session)
    next = granted
    pool = { ...changed, queue: pool.queue.slice(1) }
    hints.push(Hint.Granted({ name: head.name, to: head.session, token }))
  }
  return [savePool(next, poolName, pool), hints]
}

/** The pool a request of `kind` (and `limit`) may use, or the `Conflict` that refuses it. */
const poolFor = (
  state: State,
  poolName: string,
  kind: Pool["kind"],
  limit: number
): Pool | AcquireReply => {
  const asked = describe(kind, limit)
  const existing = HashMap.get(state.pools, poolName)
  if (Option.isSome(existing)) {
    const { kind: held, limit: heldLimit } = existing.value
    if (held !== kind || heldLimit !== limit) return AcquireReply.Conflict({ held: describe(held, heldLimit), asked })
    return existing.value
  }
  // No pool: a plain lock held makes the name a read-write lock's.
  if (kind === "semaphore" && writerHolds(state, poolName)) return AcquireReply.Conflict({ held: "lock", asked })
  return { kind, limit, holds: HashMap.empty(), queue: [] }
}

/** An acquire of a hold (`name` is its hold name, the session live). */
export const acquireHold = (
  state: State,
  sessionId: string,
  session: Session,
  name: string,
  hold: LeaseName.Hold,
  now: number
): Step<AcquireReply> => {
  const lease = HashMap.get(state.leases, name)
  if (Option.isSome(lease) && lease.value.holder === sessionId) return [AcquireReply.Granted({ token: lease.value.token }), state, []]
  if (Option.isSome(lease) && lease.value.holder !== undefined) {
    // The same request from a new session of its client while the session it left still holds it:
    // the name is taken, as any lease's; never a second holder of one name.
    const remaining = Option.map(HashMap.get(state.sessions, lease.value.holder), (s) => remainingOf(s, now))
    return [AcquireReply.HeldBy({ token: lease.value.token, remaining: Option.getOrUndefined(remaining) }), state, []]
  }
  const [served, hints] = serve(state, hold.pool)
  const pool = poolFor(served, hold.pool, kindOf(hold), hold.limit)
  if (!("queue" in pool)) return [pool, served, hints]
  return enter(served, session, pool, hold.pool, { name, session: sessionId, mode: hold.mode, weight: hold.weight }, hints)
}

/**
 * An acquire of the plain lock `poolName` while its pool exists: a writer of a read-write lock (a
 * semaphore's name refuses it). `undefined`: no pool, the plain rule applies.
 */
export const acquireWrite = (
  state: State,
  sessionId: string,
  session: Session,
  poolName: string
): Step<AcquireReply> | undefined => {
  if (!HashMap.has(state.pools, poolName)) return undefined
  const [served, hints] = serve(state, poolName)
  const pool = HashMap.get(served.pools, poolName)
  if (Option.isNone(pool)) return undefined
  if (pool.value.kind === "semaphore") {
    return [AcquireReply.Conflict({ held: describe("semaphore", pool.value.limit), asked: "lock" }), served, hints]
  }
  return enter(served, session, pool.value, poolName, { name: poolName, session: sessionId, mode: "write", weight: 1 }, hints)
}

/** Granted if nobody waits before `waiter` and it fits; else queued (once) and told `HeldBy`. */
const enter = (
  state: State,
  session: Session,
  pool: Pool,
  poolName: string,
  waiter: Waiter,
  hints: Array<Hint>
): Step<AcquireReply> => {
  const at = pool.queue.findIndex((w) => w.name === waiter.name && w.session === waiter.session)
  if ((pool.queue.length === 0 || at === 0) && fits(state, poolName, pool, waiter)) {
    const [granted, changed, token] = grant(state, poolName, pool, waiter, session)
    const queue = at === 0 ? pool.queue.slice(1) : pool.queue
    return [AcquireReply.Granted({ token }), savePool(granted, poolName, { ...changed, queue }), hints]
  }
  const queued = at >= 0 ? pool : { ...pool, queue: [...pool.queue, waiter] }
  // The pool's last token: a grant pushed to this waiter later is above it, which is what the client
  // checks before it adopts a grant it did not ask for in that round trip.
  const last = Option.getOrUndefined(Option.map(HashMap.get(state.leases, poolName), (lease) => lease.token))
  return [AcquireReply.HeldBy({ token: last, remaining: undefined }), savePool(state, poolName, queued), hints]
}

/** A hold ended (released, or its session gone): forget it, free its lease, serve the pool. */
export const endHold = (state: State, name: string, hold: LeaseName.Hold): readonly [State, Array<Hint>] => {
  const pool = HashMap.get(state.pools, hold.pool)
  const freed: State = { ...state, leases: HashMap.remove(state.leases, name) }
  if (Option.isNone(pool)) return [freed, []]
  return serve(savePool(freed, hold.pool, { ...pool.value, holds: HashMap.remove(pool.value.holds, name) }), hold.pool)
}

/** The session no longer waits for `name` (a hold's, or a writer's plain name) in `poolName`'s queue. */
export const withdraw = (state: State, sessionId: string, poolName: string, name: string): readonly [State, Array<Hint>] => {
  const pool = HashMap.get(state.pools, poolName)
  if (Option.isNone(pool)) return [state, []]
  const queue = pool.value.queue.filter((w) => !(w.name === name && w.session === sessionId))
  if (queue.length === pool.value.queue.length) return [state, []]
  return serve(savePool(state, poolName, { ...pool.value, queue }), poolName)
}
