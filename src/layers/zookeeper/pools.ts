/**
 * Semaphores and read-write locks on ZooKeeper, in the shape of Curator's `InterProcessSemaphoreV2`
 * and `InterProcessReadWriteLock`, with the pool rule of the reference model
 * (`src/layers/memory/pools.ts`; docs/design.md, "Semaphores and read-write locks").
 *
 * - **The queue.** A pool is the persistent node `{root}/pools/{pool}`; each request is an ephemeral
 *   sequential child of it, named after what it asks and whose it is: `p~<weight>~<limit>~<id>~<session>~<seq>`
 *   (permits), `r~<id>~<session>~<seq>` (a read hold), `w~<session>~<seq>` (a writer, the plain lock of
 *   the name, queued).
 *   The sequence numbers give the arrival order; a newcomer reads the pool's kind and limit from the
 *   names of the children before it. A child lives while its request waits or is granted, and goes with
 *   a release, a withdrawal or its session (ephemeral).
 * - **Fits**, judged by each waiter on the children before its own (a granted request never has a
 *   waiting one before it, so those are the holds and the earlier waiters): permits, their weights
 *   plus its own within the limit; a read, no writer child before it and the plain lease node free; a
 *   writer, no child before it and then the plain lease node its own (created at its turn). The earliest
 *   child defines the kind: a newcomer of another kind or limit deletes its child and is answered
 *   `Conflict` (so of two racing newcomers the later one yields).
 * - **Tokens.** A grant creates the hold's own ephemeral lease node `{root}/leases/{hold name}` (or,
 *   for a writer, `{root}/leases/{pool}`) at its turn: its token is that node's `czxid`, a zxid taken
 *   after every earlier grant of the name was made, so above every earlier token of the name, hold or
 *   plain lock alike. The hold node is then renewed, listed and released as any lease.
 * - **The plain lock.** A plain acquire also reads the pool's children in its pipeline, after its
 *   create: children of a semaphore answer `Conflict`, children of a read-write lock make a freshly
 *   created lease node go again and the writer queue as a `w` child (a read hold checked the node free
 *   before that writer's read, so it may be granted). A read hold sees a plain holder's node and waits.
 * - **No polling.** A waiter reads its pool's children and the plain lease node with watches; a watch
 *   event makes the session look again at once (`poolChanged`), grant itself when it fits, and push
 *   `Hint.Granted` to its client.
 */
import { AcquireReply, type BackendError, Hint } from "../../LeaseBackend.js"
import { isHoldName, parseHold, poolOf } from "../../LeaseName.js"
import { ephemeral, ephemeralSequential, isSessionGone, persistent, Rc, type Stat } from "./driver.js"
import { hold, type Paths, type Reply, type Request, sendInWindow, type Session, tokenOf } from "./session.js"

/** One child of a pool node: a request, in arrival order by `seq`. */
export interface Entry {
  readonly child: string
  readonly kind: "p" | "r" | "w"
  readonly weight: number
  readonly limit: number
  readonly seq: number
}

const sequence = /^[0-9]{10,}$/

/** The request a child's name stands for; `undefined` for a name this backend does not make. */
const parseEntry = (child: string): Entry | undefined => {
  const parts = child.split("~")
  const last = parts[parts.length - 1]!
  if (!sequence.test(last)) return undefined
  const seq = Number(last)
  if (parts[0] === "p" && parts.length === 6) {
    const weight = Number(parts[1])
    const limit = Number(parts[2])
    return Number.isSafeInteger(weight) && Number.isSafeInteger(limit) ? { child, kind: "p", weight, limit, seq } : undefined
  }
  if ((parts[0] === "r" && parts.length === 4) || (parts[0] === "w" && parts.length === 3)) {
    return { child, kind: parts[0], weight: 1, limit: 0, seq }
  }
  return undefined
}

/** A pool's children as requests, oldest first. */
export const entriesOf = (children: unknown): Array<Entry> =>
  Array.isArray(children)
    ? children.flatMap((child: string) => {
      const entry = parseEntry(child)
      return entry === undefined ? [] : [entry]
    }).sort((a, b) => a.seq - b.seq)
    : []

/**
 * The prefix of the child the session makes for `name` (a hold name, or a plain name: its writer),
 * which the server completes with the sequence number. It names the session: a hold name asked again
 * from a new session (a retried request) is another request.
 */
export const childPrefix = (session: Session, name: string): string =>
  isHoldName(name) ? `${name.slice(poolOf(name).length + 1)}~${session.id}~` : `w~${session.id}~`

/** How the client's error prints a pool's kind. */
export const describe = (entry: Pick<Entry, "kind" | "limit">): string =>
  entry.kind === "p" ? `semaphore of ${entry.limit} permits` : "read-write lock"

const asked = (entry: Pick<Entry, "kind" | "limit">): string => entry.kind === "w" ? "lock" : describe(entry)

/** The request `name` makes, before it has a child. */
const requestOf = (session: Session, name: string): Entry => {
  const held = parseHold(name)
  const child = childPrefix(session, name)
  if (held === undefined) return { child, kind: "w", weight: 1, limit: 0, seq: Number.POSITIVE_INFINITY }
  return held.mode === "read"
    ? { child, kind: "r", weight: 1, limit: 0, seq: Number.POSITIVE_INFINITY }
    : { child, kind: "p", weight: held.weight, limit: held.limit, seq: Number.POSITIVE_INFINITY }
}

type Verdict =
  | { readonly _tag: "Conflict"; readonly held: string; readonly asked: string }
  | { readonly _tag: "Fits" }
  | { readonly _tag: "Waits" }

/**
 * The pool rule for `own` among `entries` (the pool's children, oldest first), `leaseHeld`: the plain
 * lease node of the pool exists. A writer that `Fits` still has to take the plain lease node.
 */
export const judge = (own: Entry, entries: ReadonlyArray<Entry>, leaseHeld: boolean): Verdict => {
  const before = entries.filter((entry) => entry.seq < own.seq)
  const first = before[0]
  if (first !== undefined) {
    const same = own.kind === "p" ? first.kind === "p" && first.limit === own.limit : first.kind !== "p"
    if (!same) return { _tag: "Conflict", held: describe(first), asked: asked(own) }
  } else if (own.kind === "p" && leaseHeld) {
    // A plain lock held makes the name a lock's (a read-write lock's write hold).
    return { _tag: "Conflict", held: "lock", asked: asked(own) }
  }
  switch (own.kind) {
    case "p": {
      let used = 0
      for (const entry of before) if (entry.kind === "p" && entry.limit === own.limit) used += entry.weight
      return !leaseHeld && used + own.weight <= own.limit ? { _tag: "Fits" } : { _tag: "Waits" }
    }
    case "r":
      return !leaseHeld && !before.some((entry) => entry.kind === "w") ? { _tag: "Fits" } : { _tag: "Waits" }
    case "w":
      return before.length === 0 ? { _tag: "Fits" } : { _tag: "Waits" }
  }
}

/**
 * The token a `HeldBy` of a pool look carries: the plain lease node's `czxid` when it exists (its
 * holder's token), else the `pzxid` of the leases' parent, the zxid of the last lease node created or
 * deleted. Either is below every token granted after the look (a grant creates a node) and at least
 * every token of the name granted before it, so the replies of one session about a name never go
 * down, and a grant pushed to a waiter later (`Hint.Granted`) is above what its `HeldBy` said: that is
 * what the client checks before it adopts a grant it did not ask for (as the other backends' pool
 * counters do). `undefined` when neither could be read exactly.
 */
const floorOf = (lease: Stat | null, leases: Stat | null): bigint | undefined => {
  const zxid = lease !== null ? lease.czxid : leases?.pzxid
  return zxid !== undefined && Number.isSafeInteger(zxid) && zxid > 0 ? BigInt(zxid) : undefined
}

/** What one look at a pool says for a request. */
export type PoolTry =
  | { readonly _tag: "Granted"; readonly token: bigint }
  /** `floor`: below every token of the name granted after the look (see `floorOf`). */
  | { readonly _tag: "HeldBy"; readonly floor: bigint | undefined }
  | { readonly _tag: "Conflict"; readonly held: string; readonly asked: string }
  /** The session has no child for the name (never queued, withdrawn, or its child is gone). */
  | { readonly _tag: "Unqueued" }
  | { readonly _tag: "Refused"; readonly error: BackendError }
  | { readonly _tag: "Failed"; readonly reply: Reply<unknown> }

type Done<A> = (rc: number, message: string, value: A) => void

const baseName = (path: string): string => path.slice(path.lastIndexOf("/") + 1)

/**
 * The request that deletes the session's child for `name`, if it has one (and forgets it once the
 * server says it is gone): none when it has no child.
 */
export const removeChild = (session: Session, paths: Paths, name: string): ReadonlyArray<Request<undefined>> => {
  const child = session.poolChildren.get(name)
  session.poolWaiting.delete(name)
  if (child === undefined) return []
  // Forgotten now: a look at the pool already on its way then grants nothing (see `grant`).
  session.poolChildren.delete(name)
  return [(done) =>
    session.handle.a_delete_(`${paths.pool(poolOf(name))}/${child}`, -1, (rc, message) => {
      // Still there: known again, so a later release or withdrawal deletes it.
      if (rc !== Rc.ok && rc !== Rc.noNode && !session.poolChildren.has(name)) session.poolChildren.set(name, child)
      done(rc, message, undefined)
    })]
}

const failedRead = (reply: Reply<unknown>): boolean => reply.rc !== Rc.ok && reply.rc !== Rc.noNode

/**
 * One look at the pool of `name` for the session (a hold name, or a plain name whose writer queues):
 * reads the pool's children and the plain lease node, with watches; makes the session's child first
 * when it has none and `enter` is set; then judges, and grants (creates the lease node) when it fits.
 * A conflict deletes the child. The session's pool records are updated in the reply callbacks.
 */
export const tryPool = (
  session: Session,
  paths: Paths,
  name: string,
  enter: boolean,
  settled: (result: PoolTry) => void
): void => {
  const pool = poolOf(name)
  const poolPath = paths.pool(pool)
  const leasePath = paths.lease(pool)
  const reads: ReadonlyArray<Request<unknown>> = [
    (done: Done<unknown>) => session.handle.a_get_children(poolPath, true, done),
    (done: Done<unknown>) => session.handle.a_exists(leasePath, true, done),
    (done: Done<unknown>) => session.handle.a_exists(paths.leases, false, done)
  ]
  const fail = (reply: Reply<unknown>) => settled({ _tag: "Failed", reply })

  const onReads = (children: Reply<unknown>, lease: Reply<unknown>, leases: Reply<unknown>, created: boolean) => {
    if (failedRead(children)) return fail(children)
    if (failedRead(lease)) return fail(lease)
    if (failedRead(leases)) return fail(leases)
    const entries = entriesOf(children.value)
    const prefix = childPrefix(session, name)
    const known = session.poolChildren.get(name)
    // A child whose create reply was lost is found by its prefix when the request asks again (ids are
    // unique to a request); a look of a watch event only follows a child still known.
    const own = entries.find((entry) =>
      known !== undefined ? entry.child === known : enter && !created && entry.child.startsWith(prefix)
    )
    const stat = lease.rc === Rc.ok ? lease.value as Stat | null : null
    const floor = floorOf(stat, leases.rc === Rc.ok ? leases.value as Stat | null : null)
    if (own === undefined) {
      if (known !== undefined) session.poolChildren.delete(name)
      session.poolWaiting.delete(name)
      if (!enter || created) return settled({ _tag: "Unqueued" })
      const verdict = judge(requestOf(session, name), entries, stat !== null)
      if (verdict._tag === "Conflict") return settled(verdict)
      return create()
    }
    session.poolChildren.set(name, own.child)
    const verdict = judge(own, entries, stat !== null)
    switch (verdict._tag) {
      case "Conflict":
        return conflict(verdict)
      case "Waits":
        session.poolWaiting.add(name)
        return settled({ _tag: "HeldBy", floor })
      case "Fits":
        return grant(own, stat, floor)
    }
  }

  const conflict = (verdict: Extract<Verdict, { _tag: "Conflict" }>) => {
    const remove = removeChild(session, paths, name)
    if (remove.length === 0) return settled(verdict)
    sendInWindow(session, () => remove, ([removed]) =>
      removed!.rc === Rc.ok || removed!.rc === Rc.noNode ? settled(verdict) : fail(removed!))
  }

  // The child, then the same reads, in one round trip.
  const create = () =>
    sendInWindow<unknown>(session, () => [
      (done) => session.handle.a_create(poolPath, "", persistent, done),
      (done) =>
        session.handle.a_create(`${poolPath}/${childPrefix(session, name)}`, "", ephemeralSequential, (rc, message, path) => {
          if (rc === Rc.ok && typeof path === "string") session.poolChildren.set(name, baseName(path))
          done(rc, message, path)
        }),
      ...reads
    ], ([parent, child, children, lease, leases]) => {
      if (parent!.rc !== Rc.ok && parent!.rc !== Rc.nodeExists) return fail(parent!)
      if (child!.rc !== Rc.ok) return fail(child!)
      onReads(children!, lease!, leases!, true)
    })

  // Its turn: the grant is a new lease node of the session's (a writer's: the plain one, if free).
  const grant = (own: Entry, lease: Stat | null, floor: bigint | undefined) => {
    const target = isHoldName(name) ? name : pool
    if (target === pool && lease !== null) {
      if (lease.ephemeralOwner !== session.id) {
        session.poolWaiting.add(name)
        return settled({ _tag: "HeldBy", floor })
      }
      return granted(lease)
    }
    let withdrawn = false
    sendInWindow<unknown>(session, () => {
      // Released or withdrawn since the look (its child deleted before this create): no grant.
      withdrawn = session.poolChildren.get(name) !== own.child
      return withdrawn ? [] : [
        (done) => session.handle.a_create(paths.lease(target), "", ephemeral, done),
        (done) => session.handle.a_exists(paths.lease(target), true, done)
      ]
    }, ([created, read]) => {
      if (withdrawn) return settled({ _tag: "Unqueued" })
      if (read!.rc === Rc.ok && read!.value !== null && read!.value !== undefined) {
        const stat = read!.value as Stat
        if (stat.ephemeralOwner === session.id) return granted(stat)
        // Another writer took the plain lease node meanwhile: it yields on seeing this queue.
        session.poolWaiting.add(name)
        return settled({ _tag: "HeldBy", floor: floorOf(stat, null) })
      }
      if (read!.rc === Rc.noNode && (created!.rc === Rc.ok || created!.rc === Rc.nodeExists)) {
        // Created and deleted at once (a fresh writer's node, taken back): look again.
        session.poolWaiting.add(name)
        return settled({ _tag: "HeldBy", floor })
      }
      fail(created!.rc !== Rc.ok && created!.rc !== Rc.nodeExists ? created! : read!)
    })
  }

  const granted = (stat: Stat) => {
    const token = tokenOf("acquire", stat)
    if (typeof token !== "bigint") return settled({ _tag: "Refused", error: token })
    hold(session, isHoldName(name) ? name : pool, token)
    session.poolWaiting.delete(name)
    settled({ _tag: "Granted", token })
  }

  sendInWindow(session, () => reads, ([children, lease, leases]) => onReads(children!, lease!, leases!, false))
}

/**
 * A change of `pool` for the session (a child event of its queue, an event of its plain lease node, a
 * reconnect): each of its requests still waiting in that pool looks again, and a grant is pushed as
 * `Hint.Granted` (the engine adopts it, or gives it back if nobody wants it any more). A request
 * found without its child, or in conflict, is a `Released` hint: its candidate asks again itself.
 */
export const onPoolChanged = (paths: Paths, emit: (hint: Hint) => void) => (session: Session, pool: string): void => {
  for (const name of [...session.poolWaiting]) {
    if (poolOf(name) !== pool || session.ended || !session.connected) continue
    tryPool(session, paths, name, false, (result) => {
      if (result._tag === "Granted") emit(Hint.Granted({ name, to: session.id, token: result.token }))
      else if (result._tag !== "HeldBy" && !(result._tag === "Failed" && isSessionGone(result.reply.rc))) {
        emit(Hint.Released({ name }))
      }
    })
  }
}

/** The reply of a pool try, as `acquire` answers it (`Failed` and `Unqueued` are the caller's). */
export const replyOf = (result: Extract<PoolTry, { _tag: "Granted" | "HeldBy" | "Conflict" }>): AcquireReply => {
  switch (result._tag) {
    case "Granted":
      return AcquireReply.Granted({ token: result.token })
    case "HeldBy":
      return AcquireReply.HeldBy({ token: result.floor, remaining: undefined })
    case "Conflict":
      return AcquireReply.Conflict({ held: result.held, asked: result.asked })
  }
}
