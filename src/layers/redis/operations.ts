/**
 * The store operations of the Redis backend (`LeaseBackend.Store`: checked input in, the SPI's rules
 * added by `LeaseBackend.make`), each written once for both modes (`Mode`). Where the modes differ,
 * the body says so with `mode === "node"`: on one node a session's keys and a lease's or group's
 * are touched by one script; in a cluster the home's half and the slot's half are separate calls,
 * and renewal and close visit every slot the session registered (docs/design.md, "Redis Cluster:
 * per-slot shadows").
 */
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Either from "effect/Either"
import {
  AcquireReply,
  type BackendError,
  type GroupView,
  type HeldLease,
  KeepAliveReply,
  type Store,
  type StoreDirect
} from "../../LeaseBackend.js"
import { backendError, type Runner } from "./connection.js"
import { newSessionId } from "../../internal/sessionId.js"
import type { Keys } from "./keys.js"
import type { Mode } from "./options.js"
import type * as Schema from "effect/Schema"
import type * as Replies from "./replies.js"
import { acquireReply, groupViews, heldLeases } from "./replies.js"
import * as Scripts from "./scripts.js"
import { keySlot, slotTag, tagOf } from "./slots.js"
import type { Watches } from "./watches.js"

/** A `Live` renewal. */
interface Renewed {
  readonly remaining: Duration.Duration
  readonly version: string
  /** `undefined`: still the version the client knows. */
  readonly leases: ReadonlyArray<HeldLease> | undefined
  readonly groups: ReadonlyArray<GroupView>
}

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

/** The work of a renewal or a close in one slot: the registration of its leases there (`""`: none) and its groups. */
interface SlotWork {
  readonly slot: number
  readonly tag: string
  registration: string
  readonly groups: Array<string>
}

/** Cluster: a session's renewal as built for its home's slots and groups, the known version and the time left. */
interface RenewPlan {
  /** The home's registration number the plan was built for, and its slot list then (`tag, seq, ...`). */
  readonly seq: string
  readonly registrations: ReadonlyArray<string>
  /** The home's groups, joined. */
  readonly groups: string
  readonly known: string | undefined
  readonly remaining: number
  readonly work: ReadonlyArray<SlotWork>
  readonly knownBySlot: ReadonlyMap<string, string>
  /** How many slots of `work` hold leases. */
  readonly registered: number
  /** The node of the session's home. */
  readonly homeNode: string | undefined
  /** Whether it was built for calls per node (see `nodeCalls`). */
  readonly nodeCalls: boolean
  /** One `renewSlots` call per node (the home's node's goes with the home, `renewHomeSlots`). */
  readonly batches: ReadonlyArray<NodeBatch>
  /** The positions renewed one call each (unknown versions, unknown nodes). */
  readonly others: ReadonlyArray<number>
}

/** Cluster: the unchanged slots of one node and the groups there, renewed in one call. */
interface NodeBatch {
  readonly node: string
  /** Every position in `work` the call renews. */
  readonly positions: ReadonlyArray<number>
  /** The `tag, known` pairs of its slots holding leases, and their positions in `work`, in that order. */
  readonly slots: ReadonlyArray<string>
  readonly slotPositions: ReadonlyArray<number>
  /** The names of the groups in its slots, comma-separated. */
  readonly groupNames: string
  readonly call: Scripts.Call<Schema.Schema.Type<typeof Replies.SlotsRenewed>>
}

/**
 * Cluster: the version of a session's lease set is the versions of its sets in every slot holding its
 * leases (`tag=version`, sorted, joined by `,`; see `renewSlot`), so it changes exactly when one of
 * them does, and a renewal hands each slot the version the client knows there.
 */
const slotVersions = (known: string | undefined): Map<string, string> => {
  const versions = new Map<string, string>()
  for (const entry of known === undefined ? [] : known.split(",")) {
    const at = entry.indexOf("=")
    if (at > 0) versions.set(entry.slice(0, at), entry.slice(at + 1))
  }
  return versions
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
  /** Runs an Effect of a direct call (a warning and `markAll` before its answer) in the backend's scope. */
  readonly fork: (effect: Effect.Effect<void>) => void
}

/**
 * Whether a failed `renewSlots` call only means that its slots must be renewed one by one: the node
 * refused it (resharding moved its routing slot: `MOVED`, `ASK`, `TRYAGAIN`; a server before Redis
 * 7, which has no script flags), as opposed to a connection that failed, which the slot calls would
 * only wait for again.
 */
const refusedByNode = (error: BackendError): boolean =>
  error.cause instanceof Error && error.cause.name === "ReplyError"

/** Whether a refusal says that the server cannot run a script with flags at all (before Redis 7). */
const noScriptFlags = (error: BackendError): boolean =>
  error.cause instanceof Error && /compiling script|shebang/i.test(error.cause.message)

/** The store operations (all but `backend`, `hints` and `isSessionId`) on the connection of `runner`. */
export const make = (
  mode: Mode,
  k: Keys,
  { run, runAll, runWith }: Runner,
  watches: Watches,
  rules: LeaseRules
): Omit<Store, "backend" | "hints" | "isSessionId"> => {
  const holderOf = (sessionId: string, name: string): Holder => {
    if (mode === "node") {
      return { mode, key: k.session(sessionId), leases: k.sessionLeases(sessionId), prefix: k.sessionPrefix }
    }
    const tag = tagOf(k.lease(name))
    return { mode, tag, key: k.shadow(tag, sessionId), leases: k.shadowLeases(tag, sessionId), prefix: k.shadowPrefix(tag) }
  }
  /** The boot marker a lease's scripts check: the store's (mode `node`) or its slot's (mode `cluster`). */
  const markerOf = (name: string) => mode === "node" ? k.boot : k.bootIn(tagOf(k.lease(name)))
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

  const unregisteredArgs = { registration: "", homeRemaining: "" }
  const unregistered = Effect.succeed(unregisteredArgs)
  /**
   * Cluster: registers the lease's slot in the home (its time left and the registration's number, for
   * the slot's half); `undefined` when the session is gone. One node: nothing to register, the acquire
   * script reads the session key itself.
   */
  const register = (
    sessionId: string,
    holder: Holder
  ): Effect.Effect<{ readonly registration: Scripts.Arg; readonly homeRemaining: Scripts.Arg } | undefined, BackendError> =>
    holder.mode === "node"
      ? unregistered
      : run(
        "acquire",
        Scripts.register({ home: k.session(sessionId), homeSlots: k.sessionSlots(sessionId) }, { tag: holder.tag })
      ).pipe(Effect.map((reply) => reply[0] === "expired" ? undefined : { registration: reply[2], homeRemaining: reply[1] }))

  /** Cluster: the slots a renewal or a close visits, with the registration of each and the groups in it. */
  const slotWork = (registrations: ReadonlyArray<string>, groups: ReadonlyArray<string>): Array<SlotWork> => {
    const bySlot = new Map<number, SlotWork>()
    const entry = (slot: number) => {
      let work = bySlot.get(slot)
      if (work === undefined) {
        work = { slot, tag: slotTag(slot), registration: "", groups: [] }
        bySlot.set(slot, work)
      }
      return work
    }
    for (let i = 0; i + 1 < registrations.length; i += 2) entry(keySlot(registrations[i]!)).registration = registrations[i + 1]!
    for (const group of groups) entry(keySlot(k.group(group))).groups.push(group)
    return [...bySlot.values()]
  }

  /** Cluster: the session's shadow keys in the slot of `work`, and the keys of its groups there. */
  const slotKeys = (sessionId: string, work: SlotWork) => ({
    shadow: k.shadow(work.tag, sessionId),
    shadowLeases: k.shadowLeases(work.tag, sessionId),
    groups: work.groups.map(k.group)
  })

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

  /**
   * Cluster: the plan of a session's renewals, kept while its home's slots and groups, the known
   * version and the time left stay the same (the steady state), so an unchanged renewal neither reads
   * the home's slot list nor rebuilds its calls.
   */
  const plans = new Map<string, RenewPlan>()
  /**
   * Cluster: whether the servers run scripts with flags. Set once a server refused one (before
   * Redis 7): from then on the home is renewed alone and every slot with a call of its own, so a
   * renewal does not pay a refused call per node each time.
   */
  let nodeCalls = true
  const refused = (error: BackendError): Effect.Effect<void> =>
    !nodeCalls || !noScriptFlags(error) ? Effect.void : Effect.zipRight(
      Effect.sync(() => {
        nodeCalls = false
      }),
      Effect.logWarning(
        `simba redis: the server refused a renewal script with flags (${error.message}); ` +
          `renewals now send one call per slot holding a lease (Redis 7 runs one call per node)`
      ).pipe(Effect.annotateLogs({ backend: "redis" }))
    )

  const planFor = (
    sessionId: string,
    seq: string,
    registrations: ReadonlyArray<string>,
    groups: ReadonlyArray<string>,
    known: string | undefined,
    remaining: number
  ): RenewPlan => {
    const work = slotWork(registrations, groups)
    const knownBySlot = slotVersions(known)
    // By the node serving them: the slots whose lease set the client knows (or that hold no lease),
    // with the groups in them.
    const byNode = new Map<string, Array<number>>()
    work.forEach((w, i) => {
      const node = nodeCalls ? rules.nodeOf(w.slot) : undefined
      if ((w.registration !== "" && !knownBySlot.get(w.tag)) || node === undefined) return
      const positions = byNode.get(node)
      if (positions === undefined) byNode.set(node, [i])
      else positions.push(i)
    })
    const batched = new Set([...byNode.values()].flat())
    return {
      seq,
      registrations,
      groups: groups.join("\n"),
      known,
      remaining,
      work,
      knownBySlot,
      registered: work.filter((w) => w.registration !== "").length,
      homeNode: rules.nodeOf(keySlot(k.session(sessionId))),
      nodeCalls,
      batches: [...byNode].map(([node, positions]) => {
        const slotPositions = positions.filter((i) => work[i]!.registration !== "")
        const slots = slotPositions.flatMap((i) => [work[i]!.tag, knownBySlot.get(work[i]!.tag)!])
        const groupNames = positions.flatMap((i) => work[i]!.groups).join(",")
        return {
          node,
          positions,
          slots,
          slotPositions,
          groupNames,
          call: Scripts.renewSlots({ route: k.shadow(work[positions[0]!]!.tag, sessionId) }, {
            sessionId,
            remaining,
            shadowBase: k.shadowBase,
            groupPrefix: k.groupPrefix,
            groupNames,
            slots
          })
        }
      }),
      others: work.flatMap((_, i) => batched.has(i) ? [] : [i])
    }
  }

  /**
   * Cluster: the home first, with its node's slots and groups (its slot list only when it changed),
   * then the other slots it registered and its groups: the unchanged slots and the groups one
   * `renewSlots` call per node, the rest (and those a node did not renew: moved, changed, or the call
   * refused) one `renewSlot` call each, all extended to the home's time left and
   * listing their leases unless their set is still the version `known` names there; when the whole set
   * is still `known`, no lease is listed. When it is not, the slots that answered "unchanged" are asked
   * once more for their lists (the SPI answers the whole set). Then the home forgets the slots a
   * renewal closed (rarely).
   */
  const renewBySlot = (
    sessionId: string,
    ttl: number,
    known: string | undefined
  ): Effect.Effect<Renewed | undefined, BackendError> =>
    Effect.gen(function*() {
      const homeSlots = k.sessionSlots(sessionId)
      const cached = plans.get(sessionId)
      // The call to the home's node also renews that node's unchanged slots (as the plan knew them).
      const homeBatch = cached?.batches.find((batch) => batch.node === cached.homeNode)
      const homeKeys = { ...home(sessionId), homeSlots }
      const knownSeq = cached?.seq ?? ""
      // The home alone (the node refused the call, or cannot run flags): its node's slots one by one below.
      const homeAlone = Effect.map(
        run("keepAlive", Scripts.renewHome(homeKeys, { ttl, knownSeq })),
        (reply) => reply[0] === "expired" ? reply : [...reply, undefined, []] as const
      )
      const renewed = yield* !nodeCalls ? homeAlone : run(
        "keepAlive",
        Scripts.renewHomeSlots(homeKeys, {
          ttl,
          knownSeq,
          sessionId,
          shadowBase: k.shadowBase,
          groupPrefix: k.groupPrefix,
          groupNames: homeBatch?.groupNames ?? "",
          slots: homeBatch?.slots ?? []
        })
      ).pipe(Effect.catchIf(refusedByNode, (error) => Effect.zipRight(refused(error), homeAlone)))
      if (renewed[0] === "expired") {
        plans.delete(sessionId)
        return undefined
      }
      const [, remaining, seq, listed, groups, missedAtHome, viewsAtHome] = renewed
      const registrations = listed === 0 && cached !== undefined ? cached.registrations : listed === 0 ? [] : listed
      const plan = cached !== undefined && cached.seq === seq && cached.groups === groups.join("\n") &&
          cached.known === known && cached.remaining === remaining && cached.nodeCalls === nodeCalls
        ? cached
        : planFor(sessionId, seq, registrations, groups, known, remaining)
      plans.set(sessionId, plan)
      // With the plan unchanged, the home's node renewed its batch already, but for what it answered
      // back (all of it when the server refused the call).
      const doneAtHome = plan === cached ? homeBatch : undefined
      const leftAtHome = doneAtHome === undefined
        ? []
        : missedAtHome === undefined
        ? doneAtHome.positions
        : missedAtHome.map((j) => doneAtHome.slotPositions[j - 1]!)
      const batchViews: Array<Schema.Schema.Type<typeof Replies.GroupList>> = [viewsAtHome]
      const { knownBySlot, work } = plan
      const answers = new Map<number, Schema.Schema.Type<typeof Replies.SlotRenewed>>()
      const renewSlots = (positions: ReadonlyArray<number>, knownIn: (tag: string) => string) =>
        Effect.map(
          runAll(
            "keepAlive",
            positions.map((i) => {
              const w = work[i]!
              return Scripts.renewSlot(slotKeys(sessionId, w), {
                sessionId,
                remaining,
                leasePrefix: k.leasePrefix,
                registration: w.registration,
                known: knownIn(w.tag),
                groupNames: w.groups
              })
            })
          ),
          (replies) => positions.forEach((at, j) => answers.set(at, replies[j]!))
        )
      const knownIn = (tag: string) => knownBySlot.get(tag) ?? ""
      const batches = Effect.forEach(plan.batches.filter((batch) => batch !== doneAtHome), ({ call, positions, slotPositions }) =>
        run("keepAlive", call).pipe(
          Effect.map(([missed, views]) => {
            batchViews.push(views)
            return missed.map((j) => slotPositions[j - 1]!)
          }),
          Effect.catchIf(refusedByNode, (error) => Effect.as(refused(error), positions))
        ), { concurrency: "unbounded" })
      // The slots a node did not renew in its call go one by one after it; the others at once.
      yield* Effect.all([
        Effect.flatMap(batches, (missed) => renewSlots(missed.flat(), knownIn)),
        renewSlots([...plan.others, ...leftAtHome], knownIn)
      ], { concurrency: "unbounded", discard: true })
      // What a slot answered, or "unchanged at the known version" for one its node renewed in its call.
      const replyAt = (i: number): Schema.Schema.Type<typeof Replies.SlotRenewed> =>
        answers.get(i) ?? (work[i]!.registration === "" ? [[], [], "", ""] : [0, [], "", knownIn(work[i]!.tag)])
      // Unchanged: the slots that still hold leases (registered, not closed by this renewal) are the
      // ones `known` names, each at its version there, and none listed a lease.
      let unchanged = known !== undefined
      let holding = plan.registered
      for (const [i, [leases, , prune, version]] of answers) {
        if (leases !== 0 && leases.length > 0) unchanged = false
        if (work[i]!.registration === "") continue
        if (prune !== "") holding--
        else if (version !== knownIn(work[i]!.tag)) unchanged = false
      }
      if (holding !== knownBySlot.size) unchanged = false
      // A group renewed twice (its slot's node call, then that slot's own call) is listed once.
      const groupViewsOf = () => [
        ...new Map(
          [...batchViews, ...[...answers.values()].map((reply) => reply[1])].flatMap(groupViews).map((view) => [view.group, view])
        ).values()
      ]
      if (unchanged) {
        return { remaining: Duration.millis(remaining), version: known!, leases: undefined, groups: groupViewsOf() }
      }
      const again = work.flatMap((_, i) => replyAt(i)[0] === 0 ? [i] : [])
      yield* renewSlots(again, () => "")
      const replies = work.map((_, i) => replyAt(i))
      const version = work.flatMap((w, i) => w.registration === "" || replies[i]![2] !== "" ? [] : [`${w.tag}=${replies[i]![3]}`])
        .sort().join(",")
      const forget = replies.flatMap((reply, i) => reply[2] === "" ? [] : [work[i]!.tag, reply[2]])
      if (forget.length > 0) {
        yield* run("keepAlive", Scripts.forgetSlots({ home: k.session(sessionId), homeSlots }, { registrations: forget }))
      }
      return {
        remaining: Duration.millis(remaining),
        version,
        leases: replies.flatMap(([leases]) => leases === 0 ? [] : heldLeases(leases)),
        groups: groupViewsOf()
      }
    })

  /** Cluster: the home first (from then on everything answers `Expired`), then slot by slot. */
  const closeBySlot = (sessionId: string): Effect.Effect<void, BackendError> =>
    Effect.gen(function*() {
      plans.delete(sessionId)
      const [left, tags, groups] = yield* run(
        "closeSession",
        Scripts.closeHome({ ...home(sessionId), homeSlots: k.sessionSlots(sessionId) }, {})
      )
      const work = slotWork(tags.flatMap((tag) => [tag, "1"]), groups)
      yield* runAll(
        "closeSession",
        work.map((w) =>
          Scripts.closeSlot(
            { ...slotKeys(sessionId, w), marker: k.bootIn(w.tag) },
            {
              sessionId,
              leasePrefix: k.leasePrefix,
              holdsLeases: w.registration === "" ? "" : "1",
              homeRemaining: Math.max(left, 1),
              shadowPrefix: k.shadowPrefix(w.tag),
              idleMs: rules.idleMs,
              delayMs: rules.delayMs
            }
          )
        )
      )
    })

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
    if (answer._tag === "HeldBy") watches.refused(sessionId, name, sentAt)
    else if (answer._tag === "Granted") watches.done(sessionId, name)
    else watches.ended(sessionId)
    return answer
  }

  const releaseScript = (sessionId: string, name: string, token: bigint) => {
    const holder = holderOf(sessionId, name)
    return Scripts.release(leaseKeys(name, holder), { ...leaseArgs(sessionId, name, holder), token: token.toString() })
  }

  /**
   * One node: the renewal, acquire and release without a fiber (`LeaseBackend.StoreDirect`), the same
   * scripts and bookkeeping as their Effects. A cluster's go through the Effects (several calls each).
   */
  const direct: StoreDirect | undefined = mode !== "node" ? undefined : {
    keepAlive: (sessionId, ttl, known, done) =>
      runWith("keepAlive", renewScript(sessionId, ttl, known), (reply) =>
        done(Either.isLeft(reply) ? Either.left(reply.left) : Either.right(keepAliveReply(sessionId, renewedOnNode(reply.right))))),
    acquire: (sessionId, name, done) => {
      const holder = holderOf(sessionId, name)
      const sentAt = watches.sent()
      runWith("acquire", Scripts.acquire(leaseKeys(name, holder), { ...leaseArgs(sessionId, name, holder), ...unregisteredArgs }), (result) => {
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
      runWith("release", releaseScript(sessionId, name, token), (result) => done(Either.isLeft(result) ? Either.left(result.left) : Either.void))
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
        mode === "node" ? renewOnNode(sessionId, ttl, known) : renewBySlot(sessionId, ttl, known),
        (renewed) => keepAliveReply(sessionId, renewed)
      ),

    closeSession: (sessionId) => Effect.suspend(() => {
      watches.ended(sessionId)
      if (mode === "cluster") return closeBySlot(sessionId)
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
    acquire: (sessionId, name) => {
      const holder = holderOf(sessionId, name)
      // Cluster: a registration overtaken by a renewal that closed the slot answers `stale`: register again.
      const attempt = (attempts: number): Effect.Effect<AcquireReply, BackendError> =>
        Effect.flatMap(register(sessionId, holder), (registered) => {
          if (registered === undefined) return acquiredExpired
          const sentAt = watches.sent()
          return Effect.flatMap(
            run(
              "acquire",
              Scripts.acquire(leaseKeys(name, holder), { ...leaseArgs(sessionId, name, holder), ...registered })
            ),
            (reply) => {
              const answer = acquireReply(reply)
              const warned = acquireWarnings(name, reply)
              const next = answer !== undefined
                ? Effect.succeed(watched(sessionId, name, answer, sentAt))
                : attempts < 2
                ? attempt(attempts + 1)
                : Effect.fail(backendError("acquire", "slot registration went stale three times in a row"))
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
        return run(
          "withdraw",
          Scripts.withdraw(
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
