/**
 * One ZooKeeper session of the backend: the addon object (a new one per session, never reused), what
 * the backend knows of the session (the lease cache and its version, its groups, the names it
 * watches) and the handlers of the object's events, which keep that knowledge exact and push hints.
 *
 * The records are plain mutable objects on purpose: the addon calls back synchronously from the event
 * loop, each record belongs to one backend and is only touched from those callbacks and from that
 * backend's operations, which run on the same thread and never interleave inside one callback.
 */
import * as Deferred from "effect/Deferred"
import * as Effect from "effect/Effect"
import { BackendError, Hint } from "../../LeaseBackend.js"
import { poolOf } from "../../LeaseName.js"
import { closeHandle, createHandle, type Driver, type Handle, Rc, type Stat } from "./driver.js"
import type { Settings } from "./options.js"

/** What the backend knows of one session. */
export interface Session {
  /** The ZooKeeper session id (lowercase hex, as `ephemeralOwner` shows it). */
  readonly id: string
  readonly handle: Handle
  /** The session timeout the server negotiated, in milliseconds. */
  readonly timeoutMillis: number
  /** `false` between `connecting` (connection lost) and the next `connect`. */
  connected: boolean
  /** The connection was lost at least once (see `closeHandle`). */
  moved: boolean
  /** Expired, closed, or given up by the backend: answers `Expired` from now on, forever. */
  ended: boolean
  /** The leases the session holds, name -> token: the set a renewal lists. */
  readonly leases: Map<string, bigint>
  /** Bumped on every change of `leases`. */
  version: number
  /** The groups the session joined. */
  readonly groups: Set<string>
  /** Names whose create may have been applied although its reply was lost: settled by the next renewal. */
  readonly uncertain: Set<string>
  /** Lease names with a watch on this session (from acquires): a hint for each after a reconnect. */
  readonly watchedLeases: Set<string>
  /**
   * Lease names this session was refused (`HeldBy`) and still waits for: not granted, released or
   * withdrawn since. The watch event of such a name's release is answered with an acquire at once.
   */
  readonly waiting: Set<string>
  /**
   * Names whose lease node this session has a delete in flight for. A delete is by path (ZooKeeper
   * cannot delete on a `czxid`), so a second one sent before the first is answered could remove
   * another session's node created in between: it is never sent.
   */
  readonly deleting: Set<string>
  /**
   * Groups with a child watch on this session that is re-armed after it fires, with their members as
   * last read by the join or a re-arm (sorted, comma-joined).
   */
  readonly watchedGroups: Map<string, string>
  /** Monotonic milliseconds at which the last successful renewal (or the open) was sent. */
  lastRenewalMillis: number
  /** Requests sent through the window (`sendInWindow`) whose batch is not answered yet. */
  inFlight: number
  /** Batches waiting for room in the window, oldest first. */
  readonly queued: Set<Batch>
  /** Being closed by `closeSession`: queued batches are answered without being sent. */
  closing: boolean
  /** `admitQueued` is running (a reply it caused at once must not run it again, nested). */
  admitting: boolean
  /**
   * The session's own children in pool queues (`pools.ts`): a hold name, or a plain name whose writer
   * queued, -> the child's node name under `{root}/pools/{pool}`. Kept while the hold waits or is held.
   */
  readonly poolChildren: Map<string, string>
  /** Names of `poolChildren` not granted yet: a change of their pool is answered with a new look at once. */
  readonly poolWaiting: Set<string>
}

/** The node paths of a root. */
export interface Paths {
  readonly root: string
  /** The parent of every lease node. */
  readonly leases: string
  readonly lease: (name: string) => string
  readonly group: (group: string) => string
  readonly member: (group: string, sessionId: string) => string
  /** The node of a pool (a semaphore or read-write lock), parent of its queue's children. */
  readonly pool: (pool: string) => string
  /** The pool of a pool node path, or `undefined`. */
  readonly poolOf: (path: string) => string | undefined
  /** The lease name of a lease node path, or `undefined`. */
  readonly leaseOf: (path: string) => string | undefined
  /** The group of a group node path, or `undefined`. */
  readonly groupOf: (path: string) => string | undefined
}

export const paths = (settings: Settings): Paths => {
  const leasePrefix = `${settings.leasesPath}/`
  const groupPrefix = `${settings.groupsPath}/`
  const poolPrefix = `${settings.poolsPath}/`
  const below = (prefix: string) => (path: string) => {
    if (!path.startsWith(prefix)) return undefined
    const rest = path.slice(prefix.length)
    return rest.length > 0 && !rest.includes("/") ? rest : undefined
  }
  return {
    root: settings.root,
    leases: settings.leasesPath,
    lease: (name) => leasePrefix + name,
    group: (group) => groupPrefix + group,
    member: (group, sessionId) => `${groupPrefix}${group}/${sessionId}`,
    pool: (pool) => poolPrefix + pool,
    leaseOf: below(leasePrefix),
    groupOf: below(groupPrefix),
    poolOf: below(poolPrefix)
  }
}

/** Records that the session holds `name` with `token`; a change bumps the version. */
export const hold = (session: Session, name: string, token: bigint): void => {
  if (session.leases.get(name) === token) return
  session.leases.set(name, token)
  session.version++
}

/** Records that the session no longer holds `name` (with `token`, when given); a change bumps the version. */
export const drop = (session: Session, name: string, token?: bigint): void => {
  const held = session.leases.get(name)
  if (held === undefined || (token !== undefined && held !== token)) return
  session.leases.delete(name)
  session.version++
}

/** A group's members as a comparable key. */
export const membersKey = (children: ReadonlyArray<string>): string => [...children].sort().join(",")

/** The largest token this backend hands out: a `czxid` above it would not be exact as a JavaScript number. */
export const maxToken = BigInt(Number.MAX_SAFE_INTEGER)

/** The token of a node: its `czxid`, refused loudly when the addon could not give it exactly. */
export const tokenOf = (operation: string, stat: Pick<Stat, "czxid">): bigint | BackendError =>
  Number.isSafeInteger(stat.czxid) && stat.czxid > 0
    ? BigInt(stat.czxid)
    : new BackendError({
      backend: "zookeeper",
      operation,
      cause: `the node's czxid ${stat.czxid} is beyond 2^53 (or not positive): the addon cannot give it exactly, ` +
        `so no token is handed out (zxids reach 2^53 after 2^21 leader epochs)`
    })

/** What the event handlers of a session do outside it. */
export interface Events {
  readonly emit: (hint: Hint) => void
  /** The watched lease node of `name` was deleted (default: a `Released` hint). */
  readonly released?: ((session: Session, name: string) => void) | undefined
  /** The session ended on its own (expiry, or the addon closed it). */
  readonly ended: (session: Session) => void
  /**
   * Something the waiters of `pool` wait on changed for this session (its queue, or its plain lease
   * node): those still waiting look again (`pools.ts`).
   */
  readonly poolChanged?: ((session: Session, pool: string) => void) | undefined
}

/**
 * Arms (again) the watch on a lease node; a node found gone is a release. A held name whose node is
 * found to be another's (or another node of this session's) leaves the cache: only a delete by
 * someone else can do that, and the next renewal must not list it.
 */
const watchLease = (session: Session, paths: Paths, name: string, events: Events): void => {
  const read: Request<Stat | null> = (done) =>
    session.handle.a_exists(paths.lease(name), true, (rc, message, stat) => {
      if (rc === Rc.noNode) {
        drop(session, name)
        events.emit(Hint.Released({ name }))
      } else {
        const held = session.leases.get(name)
        if (rc === Rc.ok && stat !== null && held !== undefined &&
          (stat.ephemeralOwner !== session.id || stat.czxid !== Number(held))) drop(session, name, held)
      }
      done(rc, message, stat)
    })
  // A held name's node replaced behind the session's back (only an outside delete does that) must
  // leave the cache before a release of it is sent: that read skips the window (it is rare). Any
  // other re-arm waits its turn like an acquire.
  if (session.leases.has(name)) sendAll([read], () => undefined)
  else sendInWindow(session, () => [read], () => undefined)
}

/**
 * Opens a new session: a new addon object, connected within `settings.connectTimeout`, its events
 * wired to the returned record. Interrupted or timed out, the object is closed.
 */
export const open = (
  driver: Driver,
  settings: Settings,
  paths: Paths,
  timeoutMillis: number,
  events: Events
): Effect.Effect<Session, BackendError> =>
  Effect.gen(function*() {
    const opened = yield* Deferred.make<Session, BackendError>()
    let session: Session | undefined
    const setup = (handle: Handle) => {
      handle.on("connect", () => {
        if (session === undefined) {
          session = {
            id: handle.client_id,
            handle,
            timeoutMillis: handle.timeout,
            connected: true,
            moved: false,
            ended: false,
            leases: new Map(),
            version: 0,
            groups: new Set(),
            uncertain: new Set(),
            watchedLeases: new Set(),
            waiting: new Set(),
            deleting: new Set(),
            watchedGroups: new Map(),
            lastRenewalMillis: 0,
            inFlight: 0,
            queued: new Set(),
            closing: false,
            admitting: false,
            poolChildren: new Map(),
            poolWaiting: new Set()
          }
          Deferred.unsafeDone(opened, Effect.succeed(session))
          return
        }
        const wasConnected = session.connected
        session.connected = true
        if (wasConnected || session.ended) return
        // Back on the same session: the C client re-registered its watches (SetWatches), and events
        // missed while away arrive now. A hint per watched name costs a candidate one acquire and
        // covers any release the client library could not replay.
        for (const name of session.watchedLeases) {
          if (!session.leases.has(name)) events.emit(Hint.Released({ name }))
        }
        for (const group of session.watchedGroups.keys()) events.emit(Hint.GroupChanged({ group }))
        if (events.poolChanged !== undefined) {
          for (const pool of new Set([...session.poolWaiting].map(poolOf))) events.poolChanged(session, pool)
        }
      })
      handle.on("connecting", () => {
        if (session === undefined) return
        session.connected = false
        session.moved = true
        answerQueued(session)
      })
      handle.on("close", (_handle, code) => {
        if (session === undefined) {
          Deferred.unsafeDone(
            opened,
            Effect.fail(new BackendError({ backend: "zookeeper", operation: "openSession", cause: `closed while connecting (code ${code})` }))
          )
          return
        }
        session.connected = false
        if (!session.ended) {
          session.ended = true
          events.ended(session)
        }
        answerQueued(session)
      })
      handle.on("deleted", (_handle, path) => {
        const name = paths.leaseOf(path)
        if (name === undefined || session === undefined) return
        drop(session, name)
        session.watchedLeases.delete(name)
        if (events.released !== undefined) events.released(session, name)
        else events.emit(Hint.Released({ name }))
        // The plain lease of a pool: read holds wait for it to be free.
        events.poolChanged?.(session, name)
      })
      const rewatch = (_handle: unknown, path: string) => {
        // `created`: free when read, taken since; `changed`: still there. Watch it again, to hear
        // of its release.
        const name = paths.leaseOf(path)
        if (name !== undefined && session !== undefined && !session.ended) {
          watchLease(session, paths, name, events)
          events.poolChanged?.(session, name)
        }
      }
      handle.on("created", rewatch)
      handle.on("changed", rewatch)
      handle.on("child", (_handle, path) => {
        const pool = paths.poolOf(path)
        if (pool !== undefined) {
          if (session !== undefined && !session.ended) events.poolChanged?.(session, pool)
          return
        }
        const group = paths.groupOf(path)
        if (group === undefined || session === undefined) return
        const current = session
        if (current.ended || !current.watchedGroups.has(group)) {
          events.emit(Hint.GroupChanged({ group }))
          return
        }
        // A member's group: re-arm with a fresh read first, then tell, so a change made after the
        // hint always fires the new watch. A change the read shows (also one made between the event
        // and the read) is a hint; a read that failed is one too.
        sendInWindow(current, () => [(done) => current.handle.a_get_children(path, true, done)], ([read]) => {
          const members = read!.rc === Rc.ok && Array.isArray(read!.value) ? membersKey(read!.value) : undefined
          if (members !== undefined && current.watchedGroups.get(group) === members) return
          if (members !== undefined && current.watchedGroups.has(group)) current.watchedGroups.set(group, members)
          events.emit(Hint.GroupChanged({ group }))
        })
      })
    }
    const handle = yield* createHandle(driver, setup, {
      connect: settings.connect,
      timeout: timeoutMillis,
      // Never close a live session on the addon's own "no response" count (see driver.ts).
      response_counter_limit: 2_147_483_647,
      debug_level: 0
    })
    return yield* Deferred.await(opened).pipe(
      Effect.timeoutFail({
        duration: settings.connectTimeout,
        onTimeout: () =>
          new BackendError({
            backend: "zookeeper",
            operation: "openSession",
            cause: `not connected to ${settings.connect} within ${settings.connectTimeout} ms`
          })
      }),
      // Not connected (failed, timed out or interrupted): this object is never used.
      Effect.onExit((exit) => exit._tag === "Success" ? Effect.void : closeHandle(handle))
    )
  })

/** One reply of a pipelined request. */
export interface Reply<A> {
  readonly rc: number
  readonly message: string
  readonly value: A | undefined
}

/** A request: sends itself with the callback, returns the addon's send code (0 when sent). */
export type Request<A> = (done: (rc: number, message: string, value: A) => void) => number

/**
 * Sends `requests` at once on one session (one round trip: the server answers them in order) and
 * succeeds with their replies, in order, once the last has come back. A request's own side effects
 * belong in its callback, which runs even when this effect was interrupted (a timed-out call's reply
 * still updates the cache).
 */
export const pipeline = <A>(requests: ReadonlyArray<Request<A>>): Effect.Effect<ReadonlyArray<Reply<A>>> =>
  Effect.async<ReadonlyArray<Reply<A>>>((resume) => sendAll(requests, (replies) => resume(Effect.succeed(replies))))

/** `pipeline` with a plain callback, for a request made from an event handler. */
export const sendAll = <A>(requests: ReadonlyArray<Request<A>>, onReplies: (replies: ReadonlyArray<Reply<A>>) => void): void => {
  const replies: Array<Reply<A>> = new Array(requests.length)
  let pending = requests.length
  if (pending === 0) return onReplies(replies)
  const settle = (i: number, reply: Reply<A>) => {
    replies[i] = reply
    if (--pending === 0) onReplies(replies)
  }
  requests.forEach((request, i) => {
    const sent = request((rc, message, value) => settle(i, { rc, message, value }))
    if (sent !== Rc.ok) settle(i, { rc: sent, message: "not sent", value: undefined })
  })
}

/**
 * The most requests other than renewals a session has in flight (`sendInWindow`). ZooKeeper answers
 * one session's requests in order, so a renewal (sent at once, outside the window) waits behind at
 * most this many, not behind every acquire a client started: with 1,000 elections on one session,
 * 2,000 requests ahead of a renewal made it miss its timeout and the session pass its deadline. 64
 * requests (32 acquires) keep the connection busy: the server works through a session's requests one
 * at a time anyway.
 */
export const inFlightLimit = 64

/** A batch of requests waiting for room in a session's window: sends (or answers) itself when called. */
export type Batch = () => void

/** Why a batch cannot be sent now: the code its replies get without being sent, or `undefined`. */
const refusal = (session: Session): number | undefined =>
  session.ended || session.closing ? Rc.closing : session.connected ? undefined : Rc.connectionLoss

/** Sends queued batches, oldest first, while the window has room (answers them all when none can be sent). */
const admitQueued = (session: Session): void => {
  // A batch answered at once (the addon refused to send) calls back in here: the loop below goes on
  // with the next batch instead, so the stack never grows with the queue.
  if (session.admitting) return
  session.admitting = true
  try {
    for (const batch of session.queued) {
      if (refusal(session) === undefined && session.inFlight >= inFlightLimit) return
      session.queued.delete(batch)
      batch()
    }
  } finally {
    session.admitting = false
  }
}

/** Answers every queued batch without sending it, once the session ended, is closing or lost its connection. */
export const answerQueued = (session: Session): void => {
  if (refusal(session) !== undefined) admitQueued(session)
}

/**
 * Sends the requests `build` makes as one pipeline when the session's window has room (at once when
 * it has), after every batch queued before it; returns a function that takes the batch back while it
 * is still queued. A batch is admitted while fewer than `inFlightLimit` requests are in flight, so a
 * batch of k requests can take the count to `inFlightLimit + k − 1`. When the session ended, is
 * closing or is disconnected by then, nothing is sent: the replies say `Rc.closing` or
 * `Rc.connectionLoss` and the requests' own callbacks never run. `build` runs when the batch is
 * admitted, so it reads the session's state as of the send. Queuing changes nothing about the session:
 * its state changes only in reply callbacks and watch events, in the order the server processed them
 * (docs/design.md, "Why a renewal's lease list is exact").
 */
export const sendInWindow = <A>(
  session: Session,
  build: () => ReadonlyArray<Request<A>>,
  onReplies: (replies: ReadonlyArray<Reply<A>>) => void
): () => void => {
  const batch: Batch = () => {
    const requests = build()
    const refused = refusal(session)
    if (refused !== undefined) {
      return onReplies(requests.map(() => ({ rc: refused, message: "not sent (session closing or connection lost)", value: undefined })))
    }
    session.inFlight += requests.length
    sendAll(requests, (replies) => {
      session.inFlight -= requests.length
      onReplies(replies)
      admitQueued(session)
    })
  }
  session.queued.add(batch)
  admitQueued(session)
  return () => void session.queued.delete(batch)
}

/** `sendInWindow` as an effect: interrupted while queued, the batch is never sent. */
export const pipelineInWindow = <A>(session: Session, build: () => ReadonlyArray<Request<A>>): Effect.Effect<ReadonlyArray<Reply<A>>> =>
  Effect.async<ReadonlyArray<Reply<A>>>((resume) => {
    const takeBack = sendInWindow(session, build, (replies) => resume(Effect.succeed(replies)))
    return Effect.sync(takeBack)
  })
