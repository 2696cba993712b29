/**
 * The ZooKeeper backend (the `zookeeper` addon 7.3): Simba's session is the ZooKeeper session, a lease
 * is an ephemeral node, a token is that node's `czxid` (zxids only rise), and watches give the hints,
 * so the store itself keeps every rule of the SPI. This module is the entry (`make`, `layer`,
 * `layerConfig`, `config`); `options.ts`, `driver.ts` (the addon, loaded when `make` runs) and
 * `session.ts` (one session's addon object, its lease cache and event handlers) hold the rest.
 *
 * The contract is in docs/design.md, "ZooKeeper": the nodes, what a renewal proves (5/12 of the
 * negotiated timeout) and the watchdog that expires a silent session, the operations and their round
 * trips with the per-session window, why a renewal's lease list is exact, why a release needs no
 * read, and the hints and the hand-off on a watch event.
 */
import * as Clock from "effect/Clock"
import * as Config from "effect/Config"
import type * as ConfigError from "effect/ConfigError"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import type * as Scope from "effect/Scope"
import type { SimbaConfigError } from "../../Errors.js"
import * as LeaseBackend from "../../LeaseBackend.js"
import { AcquireReply, BackendError, type GroupView, Hint, KeepAliveReply } from "../../LeaseBackend.js"
import { isHoldName } from "../../LeaseName.js"
import { closeHandle, type Driver, ephemeral, isSessionGone, loadZookeeper, persistent, Rc, type Stat } from "./driver.js"
import { makeInspect } from "./inspect.js"
import { resolve, type Settings, type ZookeeperOptions } from "./options.js"
import { childPrefix, describe, entriesOf, onPoolChanged, removeChild, tryPool } from "./pools.js"
import {
  answerQueued,
  drop,
  hold,
  membersKey,
  open,
  type Paths,
  paths as pathsOf,
  pipeline,
  pipelineInWindow,
  type Reply,
  sendInWindow,
  type Session,
  tokenOf
} from "./session.js"

export { config, type ZookeeperOptions } from "./options.js"

/** The backend name used in errors, metrics and spans. */
export const backend = "zookeeper"

/** What a renewal proves, as a fraction of the negotiated session timeout (see the module comment). */
export const provenFraction = 5 / 12

/** The `remaining` of a session of negotiated timeout `timeoutMillis`. */
export const provenFor = (timeoutMillis: number): Duration.Duration =>
  Duration.millis(Math.floor(timeoutMillis * provenFraction))

const sessionIdPattern = /^[0-9a-f]{1,16}$/
// The addon takes the timeout as a 32-bit integer.
const maxTimeoutMillis = 2_147_483_647

const fail = (operation: string, reply: Reply<unknown>): BackendError =>
  new BackendError({ backend, operation, cause: new Error(`${reply.rc} ${reply.message}`) })

const lost = (operation: string): BackendError =>
  new BackendError({ backend, operation, cause: "connection to ZooKeeper lost (reconnecting)" })

const nowMillis = Effect.map(Clock.currentTimeNanos, (nanos) => Number(nanos / 1_000_000n))

/**
 * A `LeaseBackendService` on ZooKeeper, with the backend's own watcher session and every session it
 * opens in the scope. Fails with `SimbaConfigError` when an option is invalid, and with
 * `BackendError` when the addon is not installed or ZooKeeper cannot be reached.
 */
export const make = (
  options: ZookeeperOptions = {}
): Effect.Effect<LeaseBackend.LeaseBackendService, BackendError | SimbaConfigError, Scope.Scope> =>
  Effect.gen(function*() {
    const settings = yield* resolve(options)
    const driver = yield* loadZookeeper
    const scope = yield* Effect.scope
    const paths = pathsOf(settings)
    const hub = yield* Effect.acquireRelease(LeaseBackend.makeHintHub(), (hub) => hub.shutdown)
    const sessions = new Map<string, Session>()
    const emit = hub.emit
    const events = {
      emit,
      released: onReleased(paths, emit),
      poolChanged: onPoolChanged(paths, emit),
      ended: (session: Session) => {
        sessions.delete(session.id)
      }
    }
    const watcher = yield* makeWatcher(driver, settings, paths, events)
    yield* Effect.addFinalizer(() =>
      Effect.forEach([...sessions.values()], endSession, { discard: true }).pipe(
        Effect.ensuring(Effect.sync(() => sessions.clear()))
      )
    )

    const operations = makeOperations(settings, paths, sessions, events, watcher)
    const service = LeaseBackend.make({
      backend,
      holds: true,
      isSessionId: (sessionId) => sessionIdPattern.test(sessionId),
      hints: hub.hints,
      ...operations,
      inspect: makeInspect(settings, paths, watcher.current, sessions),
      // Once connected, the session is registered and watched even if the caller gave up meanwhile
      // (a timed-out call): nobody renews it, so the watchdog closes it after its timeout.
      openSession: (ttlMillis) =>
        Effect.uninterruptibleMask((restore) =>
          Effect.gen(function*() {
            const sentAt = yield* nowMillis
            const session = yield* restore(open(driver, settings, paths, Math.min(ttlMillis, maxTimeoutMillis), events))
            session.lastRenewalMillis = sentAt
            sessions.set(session.id, session)
            // Interruptible itself (a fiber forked here would inherit this region's uninterruptibility).
            yield* Effect.forkIn(Effect.interruptible(watchdog(session, sessions)), scope)
            return { sessionId: session.id, remaining: provenFor(session.timeoutMillis) }
          })
        )
    })
    // A session granted the timeout asked answers 5/12 of it: the client warns only below that.
    return { ...service, remainingFor: (ttl) => provenFor(Math.min(Math.ceil(Duration.toMillis(ttl)), maxTimeoutMillis)) }
  })

/** Ends a session here: closes its addon object (the server deletes its nodes) and never uses it again. */
const endSession = (session: Session): Effect.Effect<void> =>
  Effect.suspend(() => {
    if (session.ended) return Effect.void
    session.ended = true
    session.connected = false
    answerQueued(session)
    return closeHandle(session.handle, session.moved)
  })

/** Closes the session once its timeout has passed since the last renewal was sent (see the module comment). */
const watchdog = (session: Session, sessions: Map<string, Session>): Effect.Effect<void> =>
  Effect.gen(function*() {
    while (!session.ended) {
      const due = session.lastRenewalMillis + session.timeoutMillis
      const now = yield* nowMillis
      if (now >= due) {
        sessions.delete(session.id)
        return yield* endSession(session)
      }
      yield* Effect.sleep(Duration.millis(due - now))
    }
  })

/**
 * The backend's own session, for `members` (which names no session) and for creating the root nodes:
 * replaced by a new one when it ends; closed with the scope.
 */
interface Watcher {
  readonly current: Effect.Effect<Session, BackendError>
}

const watcherTimeoutMillis = 10_000

const makeWatcher = (
  driver: Driver,
  settings: Settings,
  paths: Paths,
  events: { readonly emit: (hint: Hint) => void }
): Effect.Effect<Watcher, BackendError, Scope.Scope> =>
  Effect.gen(function*() {
    const connect = open(driver, settings, paths, watcherTimeoutMillis, { emit: events.emit, ended: () => undefined })
    let session = yield* connect
    yield* Effect.addFinalizer(() => Effect.suspend(() => endSession(session)))
    yield* ensureRoot(session, settings)
    const lock = yield* Effect.makeSemaphore(1)
    return {
      current: lock.withPermits(1)(Effect.suspend(() => {
        if (!session.ended) return Effect.succeed(session)
        return Effect.map(connect, (fresh) => {
          session = fresh
          return fresh
        })
      }))
    }
  })

/** Creates `{root}`, `{root}/leases`, `{root}/groups` and `{root}/pools` where missing (in order, in one pipeline). */
const ensureRoot = (session: Session, settings: Settings): Effect.Effect<void, BackendError> => {
  const segments = settings.root.slice(1).split("/")
  const nodes = segments.map((_, i) => `/${segments.slice(0, i + 1).join("/")}`)
  nodes.push(settings.leasesPath, settings.groupsPath, settings.poolsPath)
  return Effect.flatMap(
    pipeline(nodes.map((path) => (done) => session.handle.a_create(path, "", persistent, done))),
    (replies) => {
      const failed = replies.find((reply) => reply.rc !== Rc.ok && reply.rc !== Rc.nodeExists)
      return failed === undefined ? Effect.void : Effect.fail(fail("createRoot", failed))
    }
  )
}

/**
 * Reads the node of `name` with a watch and settles what it says for the session, in the callback
 * (so the cache is right before any later event): its own node is held, another's or none is not.
 * `wait`: the read follows the session's own create (an acquire), so another's node means the session
 * now waits for the name (see `Session.waiting`).
 */
const settleLease = (session: Session, paths: Paths, name: string, wait: boolean) =>
(done: (rc: number, message: string, stat: Stat | null) => void) => {
  session.watchedLeases.add(name)
  return session.handle.a_exists(paths.lease(name), true, (rc, message, stat) => {
    if (rc === Rc.ok && stat !== null) {
      session.uncertain.delete(name)
      if (stat.ephemeralOwner === session.id) {
        const token = tokenOf("acquire", stat)
        if (typeof token === "bigint") hold(session, name, token)
        session.waiting.delete(name)
      } else {
        drop(session, name)
        if (wait) session.waiting.add(name)
      }
    } else if (rc === Rc.noNode) {
      session.uncertain.delete(name)
      drop(session, name)
      session.waiting.delete(name)
    }
    done(rc, message, stat)
  })
}

/** What one try for a lease (create and read, one round trip) says. */
type LeaseTry =
  | { readonly _tag: "Granted"; readonly token: bigint }
  | { readonly _tag: "HeldBy"; readonly token: bigint | undefined }
  /** Gone between the create and the read: free now. */
  | { readonly _tag: "Gone" }
  /** The node's `czxid` is beyond what the addon gives exactly (see `tokenOf`). */
  | { readonly _tag: "Refused"; readonly error: BackendError }
  | { readonly _tag: "Failed"; readonly reply: Reply<unknown> }

/** What one acquire of a name says: a lease try, or a conflict with the name's pool. */
type AcquireTry = LeaseTry | { readonly _tag: "Conflict"; readonly held: string; readonly asked: string }

/**
 * Creates the ephemeral node of `name` and reads it, then the children of the name's pool node (after
 * the create: see `pools.ts`, "The plain lock"), pipelined, in the session's window; `settled` gets
 * what they say, the pool's children and whether this create made the node.
 */
const tryLease = (
  session: Session,
  paths: Paths,
  name: string,
  settled: (result: LeaseTry, children: unknown, created: boolean) => void
): void =>
  void sendInWindow<unknown>(session, () => [
    (done) =>
      session.handle.a_create(paths.lease(name), "", ephemeral, (rc, message, path) => {
        // Applied or not? Only a read can tell: the next renewal (or acquire) settles it.
        if (rc === Rc.connectionLoss || rc === Rc.operationTimeout) session.uncertain.add(name)
        done(rc, message, path)
      }),
    settleLease(session, paths, name, true),
    (done) => session.handle.a_get_children(paths.pool(name), false, done)
  ], ([created, read, pool]) => {
    const fresh = created!.rc === Rc.ok
    const children = pool!.rc === Rc.ok ? pool!.value : undefined
    if (pool!.rc !== Rc.ok && pool!.rc !== Rc.noNode) return settled({ _tag: "Failed", reply: pool! }, undefined, fresh)
    if (read!.rc === Rc.ok && read!.value !== undefined && read!.value !== null) {
      const stat = read!.value as Stat
      const token = tokenOf("acquire", stat)
      if (typeof token !== "bigint") return settled({ _tag: "Refused", error: token }, children, fresh)
      return settled(stat.ephemeralOwner === session.id ? { _tag: "Granted", token } : { _tag: "HeldBy", token }, children, fresh)
    }
    if (read!.rc === Rc.noNode && (created!.rc === Rc.ok || created!.rc === Rc.nodeExists)) return settled({ _tag: "Gone" }, children, fresh)
    return settled(
      { _tag: "Failed", reply: created!.rc !== Rc.ok && created!.rc !== Rc.nodeExists ? created! : read! },
      children,
      fresh
    )
  })

/**
 * One acquire of the plain lease `name` (a lock, or the write lock of a read-write lock). Without a
 * pool on the name, the lease try decides. With one (see `pools.ts`): a semaphore's answers
 * `Conflict`; a read-write lock's makes the writer queue as a child of the pool (a node it just
 * created is deleted first: a read hold may have been granted before it), and take the node at its
 * turn. A writer already queued looks at the pool instead.
 */
const tryPlain = (session: Session, paths: Paths, name: string, settled: (result: AcquireTry) => void): void => {
  const queued = (enter: boolean) =>
    tryPool(session, paths, name, enter, (result) => {
      if (result._tag === "Unqueued") return enter ? settled({ _tag: "HeldBy", token: undefined }) : fresh()
      if (result._tag === "HeldBy") return settled({ _tag: "HeldBy", token: result.floor })
      settled(result)
    })
  const fresh = () =>
    tryLease(session, paths, name, (result, children, created) => {
      const entries = entriesOf(children)
      const first = entries[0]
      if (first === undefined || result._tag === "Refused" || result._tag === "Failed") return settled(result)
      // A pool lives on the name.
      const prefix = childPrefix(session, name)
      const mine = entries.find((entry) => entry.child.startsWith(prefix))
      if (result._tag === "Granted" && (!created || mine !== undefined)) return settled(result)
      session.waiting.delete(name)
      if (mine !== undefined) {
        session.poolChildren.set(name, mine.child)
        return queued(false)
      }
      const next = () =>
        first.kind === "p" ? settled({ _tag: "Conflict", held: describe(first), asked: "lock" }) : queued(true)
      if (result._tag !== "Granted") return next()
      const token = result.token
      session.deleting.add(name)
      sendInWindow<undefined>(session, () => [(done) =>
        session.handle.a_delete_(paths.lease(name), -1, (rc, message) => {
          session.deleting.delete(name)
          if (rc === Rc.ok || rc === Rc.noNode) drop(session, name, token)
          done(rc, message, undefined)
        })
      ], ([deleted]) =>
        deleted!.rc === Rc.ok || deleted!.rc === Rc.noNode ? next() : settled({ _tag: "Failed", reply: deleted! }))
    })
  if (session.poolChildren.has(name)) queued(false)
  else fresh()
}

/**
 * The watched lease node of `name` was deleted. A session that waits for it tries for it at once, as
 * its candidate would on `Released`, but without the client's turn through its loop and a backend
 * call: a win is pushed as a `Granted` hint (the engine adopts it if a candidate still wants it and
 * gives it back otherwise), a loss leaves the session waiting with a new watch. Anything else is a
 * `Released` hint, and the client tries itself.
 */
const onReleased = (paths: Paths, emit: (hint: Hint) => void) => (session: Session, name: string): void => {
  if (!session.waiting.delete(name) || session.ended || !session.connected) return emit(Hint.Released({ name }))
  tryPlain(session, paths, name, (result) => {
    if (result._tag === "Granted") emit(Hint.Granted({ name, to: session.id, token: result.token }))
    else if (result._tag !== "HeldBy") emit(Hint.Released({ name }))
  })
}

const makeOperations = (
  settings: Settings,
  paths: Paths,
  sessions: Map<string, Session>,
  events: { readonly emit: (hint: Hint) => void },
  watcher: Watcher
) => {
  /**
   * Runs `body` on a live, connected session: an unknown or ended one answers `onEnded`, a
   * disconnected one fails with connection loss without sending anything.
   */
  const onSession = <A, E>(
    operation: string,
    sessionId: string,
    onEnded: Effect.Effect<A, E>,
    body: (session: Session) => Effect.Effect<A, E | BackendError>
  ): Effect.Effect<A, E | BackendError> =>
    Effect.suspend(() => {
      const session = sessions.get(sessionId)
      if (session === undefined || session.ended) return onEnded
      if (!session.connected) return Effect.fail(lost(operation))
      return body(session)
    })

  /** A failed reply: `onEnded` when the session is gone (expired or closed), a `BackendError` otherwise. */
  const failed = <A, E>(session: Session, operation: string, reply: Reply<unknown>, onEnded: Effect.Effect<A, E>) =>
    session.ended || isSessionGone(reply.rc) ? onEnded : Effect.fail(fail(operation, reply))

  const expiredAcquire = Effect.succeed(AcquireReply.Expired())
  const expiredRenewal = Effect.succeed(KeepAliveReply.Expired())
  const expiredJoin = Effect.succeed<LeaseBackend.JoinReply>("Expired")

  const acquire = (sessionId: string, name: string) =>
    onSession("acquire", sessionId, expiredAcquire, (session) => {
      const hold = isHoldName(name)
      // A hold whose node a release is deleting is not granted from the cache: the server applies
      // that delete before this acquire's reads, which then queue the request again.
      const held = hold && !session.deleting.has(name) ? session.leases.get(name) : undefined
      if (held !== undefined) return Effect.succeed(AcquireReply.Granted({ token: held }))
      return Effect.flatMap(
        // Not taken back when the caller gives up while it is queued (see "Operations").
        Effect.async<AcquireTry>((resume) => {
          const settled = (result: AcquireTry) => resume(Effect.succeed(result))
          if (!hold) return tryPlain(session, paths, name, settled)
          tryPool(session, paths, name, true, (result) => {
            if (result._tag === "HeldBy") return settled({ _tag: "HeldBy", token: result.floor })
            // Its child vanished as it was made: the candidate asks again.
            if (result._tag === "Unqueued") return settled({ _tag: "Gone" })
            settled(result)
          })
        }),
        (result): Effect.Effect<LeaseBackend.AcquireReply, BackendError> => {
          switch (result._tag) {
            case "Granted":
              return Effect.succeed(AcquireReply.Granted({ token: result.token }))
            case "HeldBy":
              return Effect.succeed(AcquireReply.HeldBy({ token: result.token, remaining: undefined }))
            case "Gone":
              // Gone between the create and the read (released, or deleted by someone else): free now.
              events.emit(Hint.Released({ name }))
              return Effect.succeed(AcquireReply.HeldBy({ token: undefined, remaining: undefined }))
            case "Conflict":
              return Effect.succeed(AcquireReply.Conflict({ held: result.held, asked: result.asked }))
            case "Refused":
              return Effect.fail(result.error)
            case "Failed":
              return failed(session, "acquire", result.reply, expiredAcquire)
          }
        }
      )
    })

  // The session no longer answers a release of `name` with an acquire of its own, and its child in
  // the name's pool queue, if it waits there, goes (nobody waits behind it).
  const withdraw = (sessionId: string, name: string) =>
    Effect.suspend((): Effect.Effect<void, BackendError> => {
      const session = sessions.get(sessionId)
      if (session === undefined) return Effect.void
      session.waiting.delete(name)
      if (!session.poolChildren.has(name) || session.leases.has(name)) return Effect.void
      if (session.ended || !session.connected) {
        session.poolWaiting.delete(name)
        return Effect.void
      }
      return Effect.flatMap(
        pipelineInWindow<undefined>(session, () => {
          // Granted meanwhile: a hold is given back by a release, never by a withdrawal.
          if (session.leases.has(name)) return []
          return removeChild(session, paths, name)
        }),
        ([removed]) =>
          removed === undefined || removed.rc === Rc.ok || removed.rc === Rc.noNode
            ? Effect.void
            : failed(session, "withdraw", removed, Effect.void)
      )
    })

  /**
   * Deletes the lease nodes of `held` (name and token, each from the session's cache) in one
   * pipeline; a reply that says the node is gone drops it from the cache.
   */
  const deleteLeases = (session: Session, held: ReadonlyArray<readonly [string, bigint]>) =>
    held.filter(([name]) => !session.deleting.has(name)).map(([name, token]) =>
    (done: (rc: number, message: string, value: undefined) => void) => {
      // One delete of a name at a time (see `Session.deleting`): a release and a close of the
      // session, both read from the cache before the first delete was answered, once removed the
      // node another session created between the two.
      session.deleting.add(name)
      const sent = session.handle.a_delete_(paths.lease(name), -1, (rc, message) => {
        session.deleting.delete(name)
        if (rc === Rc.ok || rc === Rc.noNode) drop(session, name, token)
        done(rc, message, undefined)
      })
      if (sent !== Rc.ok) session.deleting.delete(name)
      return sent
    })

  // One round trip: the cache says whether the node is still this session's with that token (see
  // "Why a release needs no read" in the module comment), so the delete is sent without a read. The
  // cache is read when the window admits the delete, not before: it may change while queued.
  const release = (sessionId: string, name: string, token: bigint) =>
    onSession("release", sessionId, Effect.void, (session) =>
      Effect.flatMap(
        pipelineInWindow(session, () => {
          if (session.leases.get(name) !== token) return []
          // The hold's (or a queued writer's) child in the pool goes with it.
          return [...deleteLeases(session, [[name, token]]), ...removeChild(session, paths, name)]
        }),
        (replies) => {
          const bad = replies.find((reply) => reply.rc !== Rc.ok && reply.rc !== Rc.noNode)
          return bad === undefined ? Effect.void : failed(session, "release", bad, Effect.void)
        }
      ))

  const keepAlive = (sessionId: string, _ttlMillis: number, known: string | undefined) =>
    onSession("keepAlive", sessionId, expiredRenewal, (session) =>
      Effect.gen(function*() {
        const sentAt = yield* nowMillis
        const groups = [...session.groups]
        const uncertain = [...session.uncertain]
        const replies = yield* pipeline<unknown>([
          (done) => session.handle.a_exists(settings.root, false, done),
          ...uncertain.map((name) => settleLease(session, paths, name, false)),
          ...groups.map((group) => (done: (rc: number, message: string, value: unknown) => void) =>
            session.handle.a_get_children(paths.group(group), true, done)
          )
        ])
        const bad = replies.find((reply) => reply.rc !== Rc.ok && reply.rc !== Rc.noNode)
        if (bad !== undefined || replies[0]!.rc !== Rc.ok) return yield* failed(session, "keepAlive", bad ?? replies[0]!, expiredRenewal)
        if (session.ended) return KeepAliveReply.Expired()
        session.lastRenewalMillis = Math.max(session.lastRenewalMillis, sentAt)
        const views: Array<GroupView> = groups.map((group, i) => {
          const children = replies[1 + uncertain.length + i]!.value
          return { group, members: Array.isArray(children) ? [...children].sort() : [] }
        })
        const version = String(session.version)
        return KeepAliveReply.Live({
          remaining: provenFor(session.timeoutMillis),
          version,
          leases: known === version
            ? undefined
            : [...session.leases].map(([name, token]) => ({ name, token })).sort((a, b) => a.name < b.name ? -1 : a.name > b.name ? 1 : 0),
          groups: views
        })
      }))

  const join = (sessionId: string, group: string) =>
    onSession("join", sessionId, expiredJoin, (session) =>
      Effect.flatMap(
        pipelineInWindow<unknown>(session, () => {
          let memberRc: number = Rc.ok
          return [
            (done) => session.handle.a_create(paths.group(group), "", persistent, done),
            (done) =>
              session.handle.a_create(paths.member(group, session.id), "", ephemeral, (rc, message, path) => {
                memberRc = rc
                done(rc, message, path)
              }),
            (done) =>
              session.handle.a_get_children(paths.group(group), true, (rc, message, children) => {
                // In the callback: a child event right after this read must find the group watched.
                if ((memberRc === Rc.ok || memberRc === Rc.nodeExists) && rc === Rc.ok && children !== null) {
                  session.groups.add(group)
                  session.watchedGroups.set(group, membersKey(children))
                }
                done(rc, message, children)
              })
          ]
        }),
        ([_parent, member]) => {
          if (member!.rc !== Rc.ok && member!.rc !== Rc.nodeExists) return failed(session, "join", member!, expiredJoin)
          session.groups.add(group)
          if (!session.watchedGroups.has(group)) session.watchedGroups.set(group, "")
          if (member!.rc === Rc.ok) events.emit(Hint.GroupChanged({ group }))
          return Effect.succeed<LeaseBackend.JoinReply>("Joined")
        }
      ))

  const leave = (sessionId: string, group: string) =>
    onSession("leave", sessionId, Effect.void, (session) =>
      Effect.flatMap(
        pipelineInWindow<undefined>(session, () => [(done) =>
          session.handle.a_delete_(paths.member(group, session.id), -1, (rc, message) => done(rc, message, undefined))
        ]),
        ([deleted]) => {
          if (deleted!.rc !== Rc.ok && deleted!.rc !== Rc.noNode) return failed(session, "leave", deleted!, Effect.void)
          session.groups.delete(group)
          session.watchedGroups.delete(group)
          if (deleted!.rc === Rc.ok) events.emit(Hint.GroupChanged({ group }))
          return Effect.void
        }
      ))

  const members = (group: string) =>
    Effect.flatMap(watcher.current, (session) =>
      session.connected
        ? Effect.flatMap(
          pipeline<ReadonlyArray<string> | null>([(done) => session.handle.a_get_children(paths.group(group), true, done)]),
          ([read]) =>
            read!.rc === Rc.noNode
              ? Effect.succeed<ReadonlyArray<string>>([])
              : read!.rc === Rc.ok && Array.isArray(read!.value)
              ? Effect.succeed<ReadonlyArray<string>>([...read!.value].sort())
              : Effect.fail(fail("members", read!))
        )
        : Effect.fail(lost("members")))

  /**
   * Deletes the session's lease nodes (those still its own, with the cached token) and member nodes,
   * then closes it. The deletes make the close visible to every other session before this call
   * returns: the server applies a close request only after this call may already have returned.
   */
  const closeSession = (sessionId: string) =>
    Effect.suspend(() => {
      const session = sessions.get(sessionId)
      if (session === undefined) return Effect.void
      const close = Effect.suspend(() => {
        const groups = [...session.groups]
        sessions.delete(session.id)
        for (const group of groups) events.emit(Hint.GroupChanged({ group }))
        return endSession(session)
      })
      if (session.ended || !session.connected) return close
      // Calls still queued in the window are answered without being sent (none is sent after the
      // deletes), and the deletes skip the window.
      session.closing = true
      answerQueued(session)
      const held = [...session.leases]
      const groups = [...session.groups]
      const children = [...session.poolChildren.keys()].flatMap((name) => removeChild(session, paths, name))
      return pipeline<undefined>([
        ...deleteLeases(session, held),
        ...children,
        ...groups.map((group) => (done: (rc: number, message: string, value: undefined) => void) =>
          session.handle.a_delete_(paths.member(group, session.id), -1, (rc, message) => done(rc, message, undefined))
        )
      ]).pipe(
        Effect.ensuring(close),
        Effect.asVoid
      )
    })

  return { acquire, release, withdraw, keepAlive, join, leave, members, closeSession }
}

/** The ZooKeeper backend as a layer; every session it opened is closed when the layer's scope closes. */
export const layer = (
  options: ZookeeperOptions = {}
): Layer.Layer<LeaseBackend.LeaseBackend, BackendError | SimbaConfigError> =>
  Layer.scoped(LeaseBackend.LeaseBackend, make(options))

/** The ZooKeeper backend with its options read from `Config` (for example `config`, from the environment). */
export const layerConfig = (
  options: Config.Config.Wrap<ZookeeperOptions>
): Layer.Layer<LeaseBackend.LeaseBackend, BackendError | SimbaConfigError | ConfigError.ConfigError> =>
  Layer.scoped(LeaseBackend.LeaseBackend, Effect.flatMap(Config.unwrap(options), make))
