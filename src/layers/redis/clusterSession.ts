/**
 * Cluster: a session's renewal and close, which visit every slot it registered (docs/design.md,
 * "Redis Cluster: per-slot shadows"): the home first, then one `renewSlots` call per node for the
 * slots whose lease set the client knows, one `renewSlot` call for each other slot; the renewal's plan
 * is kept per session while nothing it was built from changed.
 */
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import type * as Schema from "effect/Schema"
import type { BackendError, GroupView, HeldLease } from "../../LeaseBackend.js"
import type { Runner } from "./connection.js"
import type { Keys } from "./keys.js"
import type * as Replies from "./replies.js"
import { groupViews, heldLeases } from "./replies.js"
import * as Scripts from "./scripts.js"
import { keySlot, slotTag } from "./slots.js"

/** A `Live` renewal. */
export interface Renewed {
  readonly remaining: Duration.Duration
  readonly version: string
  /** `undefined`: still the version the client knows. */
  readonly leases: ReadonlyArray<HeldLease> | undefined
  readonly groups: ReadonlyArray<GroupView>
}

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

/** What the cluster's renewal needs of the backend's rules (see `Operations.LeaseRules`). */
export interface SlotRules {
  readonly idleMs: number
  readonly delayMs: number
  readonly nodeOf: (slot: number) => string | undefined
}

/** A cluster's session renewal (`renew`) and close (`close`) on the connection of `runner`. */
export const make = (k: Keys, { run, runAll }: Runner, rules: SlotRules) => {
  const home = (sessionId: string) => ({ home: k.session(sessionId), homeGroups: k.sessionGroups(sessionId) })

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

  return { renew: renewBySlot, close: closeBySlot }
}
