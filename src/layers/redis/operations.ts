/**
 * The store operations of the Redis backend (`LeaseBackend.Store`: checked input in, the SPI's rules
 * added by `LeaseBackend.make`), each written once for both modes (`Mode`). Where the modes differ,
 * the body says so with `mode === "node"`: on one node a session's keys and a lease's or group's
 * are touched by one script; in a cluster the home's half and the slot's half are separate calls,
 * an acquire names the session's pulse on the lease's node, and renewal and close go per node and
 * per slot (`clusterSession.ts`; docs/design.md, "Redis Cluster: per-slot shadows and pulses").
 */
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Either from "effect/Either"
import {
  AcquireReply,
  type BackendError,
  KeepAliveReply,
  type Store,
  type StoreDirect
} from "../../LeaseBackend.js"
import * as ClusterSession from "./clusterSession.js"
import type { Renewed } from "./clusterSession.js"
import { backendError, type Runner } from "./connection.js"
import { newSessionId } from "../../internal/sessionId.js"
import * as LeaseName from "../../LeaseName.js"
import type { Keys } from "./keys.js"
import type { Mode } from "./options.js"
import type * as Schema from "effect/Schema"
import type * as Replies from "./replies.js"
import { acquireReply, groupViews, heldLeases } from "./replies.js"
import * as Scripts from "./scripts.js"
import { keySlot, tagOf } from "./slots.js"
import type { Watches } from "./watches.js"

/** A one-node renewal's reply as a renewal (`undefined`: the session expired). */
const renewedOnNode = (reply: Schema.Schema.Type<typeof Replies.Renewed>): Renewed | undefined =>
  reply[0] === "expired" ? undefined : {
    remaining: Duration.millis(reply[1]),
    version: reply[2],
    groups: groupViews(reply[3]),
    leases: reply[4] === undefined ? undefined : heldLeases(reply[4])
  }

/**
 * Where the scripts of a lease find the session: its session key and the set of its leases (mode
 * `node`), or its shadow in the lease's slot and the set of its leases there (mode `cluster`).
 */
type Holder =
  | { readonly mode: "node"; readonly key: string; readonly leases: string; readonly prefix: string }
  | { readonly mode: "cluster"; readonly tag: string; readonly key: string; readonly leases: string; readonly prefix: string }

/** What a cluster's acquire carries from the registration of its slot (all `""` on one node). */
interface Registered {
  readonly registration: Scripts.Arg
  readonly homeRemaining: Scripts.Arg
  /** The session's pulse for the slot's node, and how long the shadow outlives the home's time left. */
  readonly pulse: string
  readonly margin: Scripts.Arg
}

/** The store's rules for lease hashes (see `RedisOptions`). */
export interface LeaseRules {
  /** Ms a freed lease hash lives without a grant (`idleExpiry`). */
  readonly idleMs: number
  /** Ms nothing is granted after the backend finds a boot marker missing (`lockDelay`). */
  readonly delayMs: number
  /** Creates every missing boot marker (all slots in mode `cluster`) with a full lock-delay. */
  readonly markAll: Effect.Effect<void, BackendError>
  /** Cluster: the master serving `slot` as the client last learnt it (`undefined`: not known). */
  readonly nodeOf: (slot: number) => string | undefined
  /** Cluster: asks the cluster for its slot table again (a script found a key on another node). */
  readonly refreshSlots: Effect.Effect<void>
  /** Runs an Effect of a direct call (a warning and `markAll` before its answer) in the backend's scope. */
  readonly fork: (effect: Effect.Effect<void>) => void
}

/** The store operations (all but `backend`, `hints` and `isSessionId`) on the connection of `runner`. */
export const make = (
  mode: Mode,
  k: Keys,
  runner: Runner,
  watches: Watches,
  rules: LeaseRules
): Omit<Store, "backend" | "hints" | "isSessionId"> => {
  const { run, runBehind, runWith } = runner
  const cluster = ClusterSession.make(k, runner, rules)
  /** Cluster: the tag of the slot a lease lives in (a hold's: its pool's, see `Keys.holdInCluster`). */
  const slotTagOf = (name: string) => tagOf(k.lease(LeaseName.poolOf(name)))
  const holderOf = (sessionId: string, name: string): Holder => {
    if (mode === "node") {
      return { mode, key: k.session(sessionId), leases: k.sessionLeases(sessionId), prefix: k.sessionPrefix }
    }
    const tag = slotTagOf(name)
    return { mode, tag, key: k.shadow(tag, sessionId), leases: k.shadowLeases(tag, sessionId), prefix: k.shadowPrefix(tag) }
  }
  /** The boot marker a lease's scripts check: the store's (mode `node`) or its slot's (mode `cluster`). */
  const markerOf = (name: string) => mode === "node" ? k.boot : k.bootIn(slotTagOf(name))
  const home = (sessionId: string) => ({ home: k.session(sessionId), homeGroups: k.sessionGroups(sessionId) })
  /** The keys of a lease's scripts (`acquire`, `release`): the lease's, and where they find the session. */
  const leaseKeys = (name: string, holder: Holder) => ({
    lease: k.lease(name),
    queue: k.leaseQueue(name),
    holder: holder.key,
    holderLeases: holder.leases,
    marker: markerOf(name)
  })
  /** The arguments the scripts of a lease share. */
  const leaseArgs = (sessionId: string, name: string, holder: Holder) => ({
    sessionId,
    name,
    mode,
    holderPrefix: holder.prefix,
    idleMs: rules.idleMs,
    delayMs: rules.delayMs
  })

  const unregisteredArgs = { registration: "", homeRemaining: "", pulse: "", margin: 0 }
  const unregistered = Effect.succeed(unregisteredArgs)
  /**
   * Cluster: registers the lease's slot in the home (its time left and the registration's number, for
   * the slot's half); `undefined` when the session is gone. One node: nothing to register, the acquire
   * script reads the session key itself.
   */
  const register = (sessionId: string, holder: Holder): Effect.Effect<Registered | undefined, BackendError> => {
    if (holder.mode === "node") return unregistered
    // The pulse is in use before any call names it (see `ClusterSession.pulseFor`).
    const pulse = cluster.pulseFor(sessionId, keySlot(holder.key))
    return run(
      "acquire",
      Scripts.register({ home: k.session(sessionId), homeSlots: k.sessionSlots(sessionId) }, { tag: holder.tag })
    ).pipe(Effect.map((reply) =>
      reply[0] === "expired" ? undefined : {
        registration: reply[2],
        homeRemaining: reply[1],
        pulse,
        // Until the next renewal walks it (every grant changes the pulse's count, so it does).
        margin: reply[1]
      }
    ))
  }

  /**
   * One node: one script renews the session, lists its groups, and its leases unless the set is still
   * the version `known` (the session key's value, bumped by every script that changes the set).
   */
  const renewScript = (sessionId: string, ttl: number, known: string | undefined) =>
    Scripts.renew(
      { ...home(sessionId), homeLeases: k.sessionLeases(sessionId) },
      { sessionId, ttl, known: known ?? "", leasePrefix: k.leasePrefix, groupPrefix: k.groupPrefix }
    )
  const renewOnNode = (
    sessionId: string,
    ttl: number,
    known: string | undefined
  ): Effect.Effect<Renewed | undefined, BackendError> =>
    run("keepAlive", renewScript(sessionId, ttl, known)).pipe(Effect.map(renewedOnNode))

  const acquiredExpired = Effect.succeed(AcquireReply.Expired())

  /** What an acquire reply says went wrong in the store, loudly (`undefined`: nothing). */
  const acquireWarnings = (
    name: string,
    reply: Schema.Schema.Type<typeof Replies.Acquired>
  ): Effect.Effect<void, BackendError> | undefined => {
    if (reply[0] === "delayed" && reply[2] === 1) {
      // The store lost its state: say so loudly, and start the same delay in every slot at once.
      return Effect.zipRight(
        Effect.logError(
          `simba redis: the store lost its state (boot marker ${markerOf(name)} missing: restart without ` +
            `persistence, flush or fail-over); no lease is granted for ${reply[1]} ms (lockDelay)`
        ).pipe(Effect.annotateLogs({ lease: name, backend: "redis" })),
        rules.markAll
      )
    }
    if ((reply[0] === "granted" && reply[2] === 1) || (reply[0] === "held" && reply[3] === 1)) {
      return Effect.logError(
        `simba redis: the lease hash ${k.lease(name)} was missing while its holder record ${k.leaseHolder(name)} ` +
          `names a live session (deleted by hand?); it was restored for that holder instead of being granted`
      ).pipe(Effect.annotateLogs({ lease: name, backend: "redis" }))
    }
    return undefined
  }

  /** A renewal as the reply, after telling the session's channel (`Watches`) what it learnt. */
  const keepAliveReply = (sessionId: string, renewed: Renewed | undefined): KeepAliveReply => {
    if (renewed === undefined) {
      watches.ended(sessionId)
      return KeepAliveReply.Expired()
    }
    // A hand-off whose message was lost: the session holds the lease, and no longer waits.
    if (renewed.leases !== undefined && watches.size() > 0) {
      for (const lease of renewed.leases) watches.done(sessionId, lease.name)
    }
    return KeepAliveReply.Live(renewed)
  }

  /** What an acquire's reply means for the lease's channel (`Watches`): heard while the session waits. */
  const watched = (sessionId: string, name: string, answer: AcquireReply, sentAt: number): AcquireReply => {
    // On one node a hold's grant comes on the session's channel only: its own lease channel carries
    // nothing. In a cluster it comes on the channel named like the hold's one-node key (`pool_grant`).
    if (answer._tag === "HeldBy") {
      if (mode === "cluster" || !LeaseName.isHoldName(name)) watches.refused(sessionId, name, sentAt)
    }
    else if (answer._tag === "Granted") watches.done(sessionId, name)
    else watches.ended(sessionId)
    return answer
  }

  // Cluster: the scripts that read pulses of other slots are flagged for it (Redis 7).
  const acquireCall = mode === "node" ? Scripts.acquire : Scripts.acquireInCluster
  const releaseCall = mode === "node" ? Scripts.release : Scripts.releaseInCluster
  const withdrawCall = mode === "node" ? Scripts.withdraw : Scripts.withdrawInCluster
  const acquireScript = (sessionId: string, name: string, reserve: number, holder: Holder, registered: Registered) => {
    const hold = LeaseName.parseHold(name)
    if (hold !== undefined) return acquireHoldScript(sessionId, name, hold, holder, registered)
    return acquireCall(leaseKeys(name, holder), { ...leaseArgs(sessionId, name, holder), ...registered, block: reserve })
  }

  const releaseScript = (sessionId: string, name: string, token: bigint) => {
    const holder = holderOf(sessionId, name)
    const hold = LeaseName.parseHold(name)
    if (hold !== undefined) return releaseHoldScript(sessionId, name, hold, holder, token)
    return releaseCall(leaseKeys(name, holder), { ...leaseArgs(sessionId, name, holder), token: token.toString() })
  }

  // Holds (semaphores, read locks; scripts/pools.ts): the hold's lease hash (in a cluster tagged by
  // its pool, so in the pool's slot), the pool's plain lease hash, where the session is found alive
  // there and its lease set (its session key, or its shadow in the pool's slot).
  const acquireHoldCall = mode === "node" ? Scripts.acquireHold : Scripts.acquireHoldInCluster
  const releaseHoldCall = mode === "node" ? Scripts.releaseHold : Scripts.releaseHoldInCluster
  const withdrawHoldCall = mode === "node" ? Scripts.withdrawHold : Scripts.withdrawHoldInCluster
  const holdKeys = (name: string, hold: LeaseName.Hold, holder: Holder) => ({
    holdLease: mode === "node" ? k.lease(name) : k.holdInCluster(hold.pool, name),
    lease: k.lease(hold.pool),
    holder: holder.key,
    holderLeases: holder.leases,
    marker: markerOf(hold.pool)
  })
  const holdArgs = (holder: Holder) => ({
    mode,
    holderPrefix: holder.prefix,
    leasePrefix: k.leasePrefix,
    idleMs: rules.idleMs,
    delayMs: rules.delayMs
  })
  const acquireHoldScript = (
    sessionId: string,
    name: string,
    hold: LeaseName.Hold,
    holder: Holder,
    registered: Registered
  ) =>
    acquireHoldCall(holdKeys(name, hold, holder), {
      ...holdArgs(holder),
      ...registered,
      sessionId,
      holdName: name,
      pool: hold.pool,
      holdMode: hold.mode,
      weight: hold.weight,
      limit: hold.limit
    })
  const releaseHoldScript = (sessionId: string, name: string, hold: LeaseName.Hold, holder: Holder, token: bigint) =>
    releaseHoldCall(holdKeys(name, hold, holder), { ...holdArgs(holder), sessionId, holdName: name, token: token.toString() })

  /**
   * One node: the renewal, acquire and release without a fiber (`LeaseBackend.StoreDirect`), the same
   * scripts and bookkeeping as their Effects. A cluster's go through the Effects (several calls each).
   */
  const direct: StoreDirect | undefined = mode !== "node" ? undefined : {
    keepAlive: (sessionId, ttl, known, done) =>
      runWith("keepAlive", renewScript(sessionId, ttl, known), (reply) =>
        done(Either.map(reply, (renewed) => keepAliveReply(sessionId, renewedOnNode(renewed))))),
    acquire: (sessionId, name, reserve, done) => {
      const holder = holderOf(sessionId, name)
      const sentAt = watches.sent()
      runWith("acquire", acquireScript(sessionId, name, reserve, holder, unregisteredArgs), (result) => {
        if (Either.isLeft(result)) return done(Either.left(result.left))
        const reply = result.right
        const answer = acquireReply(reply)
        // One node never answers `stale` (nothing to register); a reply that does is not read.
        if (answer === undefined) return done(Either.left(backendError("acquire", "unexpected stale reply on one node")))
        const warned = acquireWarnings(name, reply)
        if (warned === undefined) return done(Either.right(watched(sessionId, name, answer, sentAt)))
        rules.fork(Effect.match(warned, {
          onFailure: (error) => done(Either.left(error)),
          onSuccess: () => done(Either.right(watched(sessionId, name, answer, sentAt)))
        }))
      })
    },
    release: (sessionId, name, token, done) =>
      runBehind("release", releaseScript(sessionId, name, token), (result) => done(Either.map(result, () => undefined)))
  }

  return {
    direct,
    openSession: (ttl) =>
      Effect.gen(function*() {
        const sessionId = newSessionId()
        const reply = yield* run("openSession", Scripts.open({ home: k.session(sessionId) }, { ttl }))
        if (reply[0] === "exists") return yield* Effect.fail(backendError("openSession", "session id collision"))
        // Mode `node`: its hand-off grants come on its own channel (see `Watches`).
        yield* Effect.promise(() => watches.opened(sessionId))
        return { sessionId, remaining: Duration.millis(reply[1]) }
      }),

    keepAlive: (sessionId, ttl, known) =>
      Effect.map(
        mode === "node" ? renewOnNode(sessionId, ttl, known) : cluster.renew(sessionId, ttl, known),
        (renewed) => keepAliveReply(sessionId, renewed)
      ),

    closeSession: (sessionId) => Effect.suspend(() => {
      watches.ended(sessionId)
      if (mode === "cluster") return cluster.close(sessionId)
      return run(
        "closeSession",
        Scripts.close(
          { ...home(sessionId), homeLeases: k.sessionLeases(sessionId), marker: k.boot },
          {
            sessionId,
            leasePrefix: k.leasePrefix,
            groupPrefix: k.groupPrefix,
            sessionPrefix: k.sessionPrefix,
            idleMs: rules.idleMs,
            delayMs: rules.delayMs
          }
        )
      ).pipe(Effect.asVoid)
    }),

    // acquire and release are on every lock's path: combinators, not `Effect.gen` (a generator costs
    // more than the rest of the call's JavaScript; see docs/performance.md).
    acquire: (sessionId, name, reserve) => {
      const holder = holderOf(sessionId, name)
      // Cluster: a registration overtaken by a renewal that closed the slot answers `stale`: register
      // again; a pulse on another node (the slot table is behind a resharding) answers `moved`: the
      // table is refreshed first.
      const attempt = (attempts: number): Effect.Effect<AcquireReply, BackendError> =>
        Effect.flatMap(register(sessionId, holder), (registered) => {
          if (registered === undefined) return acquiredExpired
          const sentAt = watches.sent()
          return Effect.flatMap(
            run("acquire", acquireScript(sessionId, name, reserve, holder, registered)),
            (reply) => {
              const answer = acquireReply(reply)
              const warned = acquireWarnings(name, reply)
              const next = answer !== undefined
                ? Effect.succeed(watched(sessionId, name, answer, sentAt))
                : attempts < 2
                ? reply[0] === "moved" ? Effect.zipRight(rules.refreshSlots, attempt(attempts + 1)) : attempt(attempts + 1)
                : Effect.fail(backendError("acquire", `slot registration answered ${reply[0]} three times in a row`))
              return warned === undefined ? next : Effect.zipRight(warned, next)
            }
          )
        })
      return attempt(0)
    },

    release: (sessionId, name, token) => Effect.suspend(() => Effect.asVoid(run("release", releaseScript(sessionId, name, token)))),

    withdraw: (sessionId, name) =>
      Effect.suspend(() => {
        watches.done(sessionId, name)
        const hold = LeaseName.parseHold(name)
        if (hold !== undefined) {
          return run(
            "withdraw",
            withdrawHoldCall(
              { lease: k.lease(hold.pool), marker: markerOf(hold.pool) },
              { ...holdArgs(holderOf(sessionId, name)), holdName: name, pool: hold.pool }
            )
          ).pipe(Effect.asVoid)
        }
        return run(
          "withdraw",
          withdrawCall(
            { lease: k.lease(name), queue: k.leaseQueue(name), marker: markerOf(name) },
            leaseArgs(sessionId, name, holderOf(sessionId, name))
          )
        ).pipe(Effect.asVoid)
      }),

    join: (sessionId, group) =>
      Effect.gen(function*() {
        if (mode === "node") {
          const joined = yield* run(
            "join",
            Scripts.join({ ...home(sessionId), group: k.group(group) }, { sessionId, groupName: group })
          )
          return joined === "joined" ? "Joined" as const : "Expired" as const
        }
        // Cluster: the home's half (in its slot), then the group's (in the group's).
        const listed = yield* run("join", Scripts.joinHome(home(sessionId), { groupName: group }))
        if (listed[0] === "expired") return "Expired" as const
        yield* run("join", Scripts.addMember({ group: k.group(group) }, { sessionId, own: listed[1] }))
        return "Joined" as const
      }),

    leave: (sessionId, group) =>
      Effect.gen(function*() {
        const { homeGroups } = home(sessionId)
        if (mode === "node") {
          yield* run("leave", Scripts.leave({ homeGroups, group: k.group(group) }, { sessionId, groupName: group }))
          return
        }
        // Cluster: the group's half (in its slot), then the home's.
        yield* run("leave", Scripts.removeMember({ group: k.group(group) }, { sessionId }))
        yield* run("leave", Scripts.forgetGroup({ homeGroups }, { groupName: group }))
      }),

    members: (group) =>
      run("members", Scripts.members({ group: k.group(group) }, {})).pipe(Effect.map((ids) => [...ids].sort()))
  }
}
