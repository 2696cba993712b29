/**
 * Cluster: a session's renewal and close (docs/design.md, "Redis Cluster: per-slot shadows and
 * pulses"). A renewal is, at once, the home's call, which also renews the session's pulse on the
 * home's node, and one `renewSlots` call per other pulse: each extends its pulse and walks one slice
 * of the shadows relying on it (all of them when the plan is new or a slice is due), so an unchanged
 * renewal costs one call per node and a slice of the slots; the slots whose lease set changed, or
 * that a call did not renew, are renewed (and listed) by node in `renewShadows` calls. The renewal's
 * plan is kept per session while nothing it was built from changed.
 */
import * as Clock from "effect/Clock"
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

/** One call's share of a pulse's slots: the `tag,known` pairs (one string), their positions in `work`, and the call. */
interface Slice {
  readonly slotList: string
  readonly slotPositions: ReadonlyArray<number>
  readonly call: Scripts.Call<Schema.Schema.Type<typeof Replies.SlotsRenewed>>
}

/** Cluster: one pulse of the session, and the slots and groups its calls renew. */
interface PulseWork {
  readonly tag: string
  /** The positions in `work` its calls renew (its slots' shadows at a known version, and its node's groups). */
  readonly positions: ReadonlyArray<number>
  /** The names of the groups on its node, comma-separated: renewed by every call. */
  readonly groupNames: string
  /** Walked one per renewal in turn; together they are `full`. */
  readonly slices: ReadonlyArray<Slice>
  readonly full: Slice
  /**
   * When each slice was last walked (client ms at the start of a renewal that succeeded): a slice not
   * walked for half the margin is walked with the rest at once (see `dueAfter`).
   */
  readonly walkedAt: Array<number>
}

/** Cluster: a session's renewal as built for its home's slots and groups, its pulses, the known version and the time left. */
interface RenewPlan {
  /** The home's registration number the plan was built for, and its slot list then (`tag, seq, ...`). */
  readonly seq: string
  readonly registrations: ReadonlyArray<string>
  /** The home's groups, joined. */
  readonly groups: string
  readonly known: string | undefined
  readonly remaining: number
  readonly ttl: number
  /** How many slices a pulse's slots were cut into at most (see `sliceCount`). */
  readonly sliceCount: number
  /** How many pulses the session used when the plan was built (the set only grows). */
  readonly pulsesUsed: number
  readonly work: ReadonlyArray<SlotWork>
  readonly knownBySlot: ReadonlyMap<string, string>
  /** The count of each pulse as `known` names it. */
  readonly knownCounts: ReadonlyMap<string, string>
  /** How many slots of `work` hold leases. */
  readonly registered: number
  /** The pulse of the home's node (in the home's slot) and the others. */
  readonly home: PulseWork
  readonly pulses: ReadonlyArray<PulseWork>
  /** The positions renewed one call each (unknown versions, unknown nodes). */
  readonly others: ReadonlyArray<number>
  /** Renewals done with this plan (which slice is next). */
  rounds: number
}

/**
 * Cluster: the version of a session's lease set: the versions of its sets in every slot holding its
 * leases (`tag=version`, sorted, joined by `,`; see `renewSlot`), then `|` and the counts of its
 * pulses (`tag=count`, sorted), so it changes when any of them does; a renewal hands each slot the
 * version the client knows there and compares each pulse's count with the known one.
 */
const splitVersion = (known: string | undefined): [Map<string, string>, Map<string, string>] => {
  const at = known === undefined ? -1 : known.indexOf("|")
  return at < 0 ? [pairs(known), new Map()] : [pairs(known!.slice(0, at)), pairs(known!.slice(at + 1))]
}
const pairs = (text: string | undefined): Map<string, string> => {
  const entries = new Map<string, string>()
  for (const entry of text === undefined || text === "" ? [] : text.split(",")) {
    const at = entry.indexOf("=")
    if (at > 0) entries.set(entry.slice(0, at), entry.slice(at + 1))
  }
  return entries
}
/** A pulse count (`b:n`) with no change counted since the pulse was made (`b:0`). */
const noChanges = (count: string): string => count.slice(0, count.indexOf(":") + 1) + "0"
const joinPairs = (entries: Iterable<readonly [string, string]>): string =>
  [...entries].map(([tag, value]) => `${tag}=${value}`).sort().join(",")

/**
 * The margin by which a shadow outlives the home's time left (`ttl` x 16): where a shadow's pulse
 * cannot be read (its slot moved to another node), the shadow alone says the session lives, so it
 * must outlast every deadline the client derives before its next walk; the price is that such a
 * slot (only there) is taken over up to the margin later after a crash, never earlier. The larger
 * the margin, the more renewals a walk of every shadow is spread over (see `sliceCount`): at 16 x,
 * a session renewed 9 times per `ttl` walks a 64th of its shadows per renewal.
 */
export const marginOf = (ttl: number): number => ttl * 16

/**
 * The most slots one `renewShadows` call renews and lists: a renewal that lists a large lease set
 * (its first, or one after a change) costs a few calls per node, each short enough (~1-3 ms of server
 * time) not to hold up the node's other clients for long.
 */
const shadowsPerCall = 512

/**
 * A slice not walked for this long (half the margin) is walked at once: a shadow walked at `t` lives
 * until at least `t` + the home's time left + the margin, and a renewal at `t'` derives a deadline of
 * at most `t'` + that time, so the shadow outlives it while `t' - t` stays under the margin.
 */
const dueAfter = (ttl: number): number => marginOf(ttl) / 2

/**
 * How many slices a pulse's slots are walked in: as many renewals as fit in `dueAfter` at the
 * spacing the session's renewals have (one less, for slack), at most 64.
 */
const sliceCount = (ttl: number, spacing: number): number =>
  Math.max(1, Math.min(64, Math.floor(dueAfter(ttl) / Math.max(spacing, 1)) - 1))

/** What the cluster's renewal needs of the backend's rules (see `Operations.LeaseRules`). */
export interface SlotRules {
  readonly idleMs: number
  readonly delayMs: number
  readonly nodeOf: (slot: number) => string | undefined
}

/** A cluster's session renewal (`renew`), close (`close`) and pulses (`pulseFor`) on the connection of `runner`. */
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
   * The slot each node's pulses live in (every session's pulse on that node): the first slot the node
   * served when asked, kept while it still serves it. A cache of the slot table, nothing more.
   */
  const pulseSlots = new Map<string, number>()
  const pulseSlotOf = (node: string): number => {
    const kept = pulseSlots.get(node)
    if (kept !== undefined && rules.nodeOf(kept) === node) return kept
    let slot = 0
    while (slot < 16383 && rules.nodeOf(slot) !== node) slot++
    pulseSlots.set(node, slot)
    return slot
  }
  /** The tag of the session's pulse for `slot`'s node: the home's own (sessionId) on the home's node. */
  const pulseTag = (sessionId: string, slot: number): string | undefined => {
    const node = rules.nodeOf(slot)
    if (node === undefined) return undefined
    if (node === rules.nodeOf(keySlot(k.session(sessionId)))) return sessionId
    return slotTag(pulseSlotOf(node))
  }
  /**
   * The pulses each session has used: every one a shadow may name, so every renewal renews them all
   * (a pulse no renewal extends would let the slots relying on it see the session dead before its
   * deadline). A pulse is added before the call that names it is sent; the set only grows while the
   * session lives (a new pulse comes only with a change of the slot table).
   */
  const pulsesInUse = new Map<string, Set<string>>()
  const usePulse = (sessionId: string, tag: string): string => {
    let used = pulsesInUse.get(sessionId)
    if (used === undefined) pulsesInUse.set(sessionId, used = new Set())
    used.add(tag)
    return k.pulse(tag, sessionId)
  }
  /**
   * The pulse key an acquire (or a renewal's `renewSlot`) in `slot` names, now in use; `slot`'s own tag
   * while the client does not know its node (a pulse in the slot itself is always readable there).
   */
  const pulseFor = (sessionId: string, slot: number): string =>
    usePulse(sessionId, pulseTag(sessionId, slot) ?? slotTag(slot))

  /** When each session's last renewal started (client ms): their spacing sets the number of slices. */
  const lastRenewal = new Map<string, number>()
  /**
   * Cluster: the plan of a session's renewals, kept while its home's slots and groups, its pulses, the
   * known version and the time left stay the same (the steady state), so an unchanged renewal neither
   * reads the home's slot list nor rebuilds its calls.
   */
  const plans = new Map<string, RenewPlan>()
  const forget = (sessionId: string) => {
    plans.delete(sessionId)
    pulsesInUse.delete(sessionId)
    lastRenewal.delete(sessionId)
  }

  const planFor = (
    sessionId: string,
    seq: string,
    registrations: ReadonlyArray<string>,
    groups: ReadonlyArray<string>,
    known: string | undefined,
    remaining: number,
    ttl: number,
    spacing: number
  ): RenewPlan => {
    const work = slotWork(registrations, groups)
    const [knownBySlot, knownCounts] = splitVersion(known)
    const used = pulsesInUse.get(sessionId) ?? new Set<string>()
    // By the pulse of their node: the slots whose lease set the client knows (or that hold no lease),
    // with the groups in them (a shadow relying on another pulse is answered back and pointed at this
    // one); the rest go one call each. Every pulse in use gets a call, with or without slots.
    const byPulse = new Map<string, Array<number>>([[sessionId, []]])
    for (const tag of used) byPulse.set(tag, [])
    work.forEach((w, i) => {
      const tag = pulseTag(sessionId, w.slot)
      if (tag === undefined || (w.registration !== "" && !knownBySlot.get(w.tag))) return
      const positions = byPulse.get(tag)
      if (positions === undefined) byPulse.set(tag, [i])
      else positions.push(i)
    })
    const margin = marginOf(ttl)
    const count = sliceCount(ttl, spacing)
    const pulseWork = (tag: string, positions: ReadonlyArray<number>): PulseWork => {
      const slotPositions = positions.filter((i) => work[i]!.registration !== "")
      const groupNames = positions.flatMap((i) => work[i]!.groups).join(",")
      const slice = (at: ReadonlyArray<number>): Slice => {
        const slotList = at.flatMap((i) => [work[i]!.tag, knownBySlot.get(work[i]!.tag)!]).join(",")
        return {
          slotList,
          slotPositions: at,
          call: Scripts.renewSlots({ pulse: k.pulse(tag, sessionId) }, {
            sessionId,
            remaining,
            margin,
            shadowBase: k.shadowBase,
            groupPrefix: k.groupPrefix,
            groupNames,
            slotList
          })
        }
      }
      const n = Math.min(count, Math.max(slotPositions.length, 1))
      return {
        tag,
        positions,
        groupNames,
        slices: Array.from({ length: n }, (_, j) => slice(slotPositions.filter((_, m) => m % n === j))),
        full: slice(slotPositions),
        walkedAt: Array.from({ length: n }, () => -Infinity)
      }
    }
    const pulses = [...byPulse].map(([tag, positions]) => pulseWork(tag, positions))
    const batched = new Set(pulses.flatMap((p) => p.positions))
    return {
      seq,
      registrations,
      groups: groups.join("\n"),
      known,
      remaining,
      ttl,
      sliceCount: count,
      pulsesUsed: used.size,
      work,
      knownBySlot,
      knownCounts,
      registered: work.filter((w) => w.registration !== "").length,
      home: pulses[0]!,
      pulses: pulses.slice(1),
      others: work.flatMap((_, i) => batched.has(i) ? [] : [i]),
      rounds: 0
    }
  }

  /**
   * What a pulse's call walks this renewal: the next slice in turn, or all of its slots when the plan
   * is new (`fresh`) or another slice is due; and which slices that walks.
   */
  const pick = (
    pulse: PulseWork,
    rounds: number,
    fresh: boolean,
    now: number,
    due: number
  ): { readonly slice: Slice; readonly walks: ReadonlyArray<number> } => {
    const at = rounds % pulse.slices.length
    const late = fresh || pulse.walkedAt.some((t, j) => j !== at && now - t > due)
    return late ? { slice: pulse.full, walks: pulse.walkedAt.map((_, j) => j) } : { slice: pulse.slices[at]!, walks: [at] }
  }

  /**
   * Cluster: the home, with its pulse and the next slice of the slots relying on it (its slot list
   * only when it changed), and one `renewSlots` call per other pulse with its slice, the groups on its
   * node included, all at once (after the home when the plan is new); the slots a call did not renew
   * (moved, changed) and those the plan could not place are renewed by node (`renewEach` below); all
   * are extended to the home's time left (shadows by the margin more), listing their leases unless
   * their set is still the version `known` names there.
   * When every pulse's count and every slot asked is still as `known` names them, no lease is listed;
   * otherwise every slot is asked for its list (the SPI answers the whole set). Then the home forgets
   * the slots a renewal closed (rarely).
   */
  const renewBySlot = (
    sessionId: string,
    ttl: number,
    known: string | undefined
  ): Effect.Effect<Renewed | undefined, BackendError> =>
    Effect.gen(function*() {
      const startedAt = yield* Clock.currentTimeMillis
      const homeSlots = k.sessionSlots(sessionId)
      const cached = plans.get(sessionId)
      const due = dueAfter(ttl)
      const missedAt = (slice: Slice, missed: ReadonlyArray<number>) => missed.map((j) => slice.slotPositions[j - 1]!)
      const counts = new Map<string, string>()
      const batchViews: Array<Schema.Schema.Type<typeof Replies.GroupList>> = []
      /** A pulse's call: its count and its groups' views noted, the positions it did not renew answered. */
      const walk = ({ pulse, slice }: { readonly pulse: PulseWork; readonly slice: Slice }) =>
        Effect.map(run("keepAlive", slice.call), ([count, missed, views]) => {
          counts.set(pulse.tag, count)
          batchViews.push(views)
          return missedAt(slice, missed)
        })
      // With a plan, every call goes at once: the home's (with its pulse and slice) and each other
      // pulse's, for the time left the plan was built with. A pulse extended for a session whose home
      // turns out gone only delays a takeover (by that time at most), never allows an early one.
      const homePick = cached === undefined ? undefined : pick(cached.home, cached.rounds, false, startedAt, due)
      const early = cached === undefined ? [] : cached.pulses.map((pulse) => ({
        pulse,
        ...pick(pulse, cached.rounds, false, startedAt, due)
      }))
      const [renewed, missedEarly] = yield* Effect.all([
        run(
          "keepAlive",
          Scripts.renewHomeSlots({ ...home(sessionId), homeSlots, homePulse: k.pulse(sessionId, sessionId) }, {
            ttl,
            knownSeq: cached?.seq ?? "",
            sessionId,
            margin: marginOf(ttl),
            shadowBase: k.shadowBase,
            groupPrefix: k.groupPrefix,
            groupNames: cached?.home.groupNames ?? "",
            slotList: homePick?.slice.slotList ?? ""
          })
        ),
        Effect.forEach(early, walk, { concurrency: "unbounded" })
      ], { concurrency: "unbounded" })
      if (renewed[0] === "expired") {
        forget(sessionId)
        return undefined
      }
      // The calls that went early extended their pulses for the time the plan was built with: a plan
      // is kept only while the home answers the same time left (see `planFor`).
      const [, remaining, seq, listed, groups, missedAtHome, viewsAtHome, homeCount] = renewed
      const registrations = listed === 0 && cached !== undefined ? cached.registrations : listed === 0 ? [] : listed
      const previous = lastRenewal.get(sessionId)
      lastRenewal.set(sessionId, startedAt)
      const spacing = previous === undefined ? ttl / 3 : startedAt - previous
      // Renewals coming much more often than the plan's slices assumed: smaller slices (planned anew,
      // only for at least half as many slices again, so a jittery spacing does not plan every time).
      const plan = cached !== undefined && cached.seq === seq && cached.groups === groups.join("\n") &&
          cached.known === known && cached.remaining === remaining && cached.ttl === ttl &&
          cached.pulsesUsed === (pulsesInUse.get(sessionId)?.size ?? 0) &&
          sliceCount(ttl, spacing) < cached.sliceCount * 1.5
        ? cached
        : planFor(sessionId, seq, registrations, groups, known, remaining, ttl, spacing)
      plans.set(sessionId, plan)
      const fresh = plan !== cached
      const { knownBySlot, work } = plan
      // A new plan walks every pulse's slots in full (what went early was for the plan before).
      const picks = fresh
        ? [plan.home, ...plan.pulses].map((pulse) => ({ pulse, ...pick(pulse, plan.rounds, true, startedAt, due) }))
        : []
      if (fresh) counts.clear()
      else counts.set(sessionId, homeCount)
      batchViews.push(viewsAtHome)
      const answers = new Map<number, Schema.Schema.Type<typeof Replies.SlotRenewed>>()
      /**
       * The slots at `positions` renewed each on its own terms, listing its leases unless its set is
       * still at the version `knownIn` gives: those holding leases and no group by node, in `renewShadows` calls
       * of up to `shadowsPerCall` slots (a slot its node's call found elsewhere, and every slot with
       * groups, in a `renewSlot` call of its own). A slot answered before keeps the group views it had.
       */
      const renewEach = (positions: ReadonlyArray<number>, knownIn: (tag: string) => string) => {
        const byPulse = new Map<string, Array<number>>()
        const alone: Array<number> = []
        for (const i of positions) {
          const w = work[i]!
          if (w.registration === "" || w.groups.length > 0) {
            alone.push(i)
            continue
          }
          const pulse = pulseFor(sessionId, w.slot)
          const batch = byPulse.get(pulse)
          if (batch === undefined) byPulse.set(pulse, [i])
          else batch.push(i)
        }
        const answer = (at: number, reply: Schema.Schema.Type<typeof Replies.SlotRenewed>) =>
          answers.set(at, reply[1].length > 0 ? reply : [reply[0], answers.get(at)?.[1] ?? [], reply[2], reply[3]])
        const oneByOne = (at: ReadonlyArray<number>) =>
          Effect.map(
            runAll(
              "keepAlive",
              at.map((i) => {
                const w = work[i]!
                return Scripts.renewSlot(slotKeys(sessionId, w), {
                  sessionId,
                  remaining,
                  margin: marginOf(ttl),
                  pulse: w.registration === "" ? "" : pulseFor(sessionId, w.slot),
                  leasePrefix: k.leasePrefix,
                  registration: w.registration,
                  known: knownIn(w.tag),
                  groupNames: w.groups
                })
              })
            ),
            (replies) => at.forEach((i, j) => answer(i, replies[j]!))
          )
        const batches = [...byPulse].flatMap(([pulse, at]) =>
          Array.from({ length: Math.ceil(at.length / shadowsPerCall) }, (_, j) => {
            const slice = at.slice(j * shadowsPerCall, (j + 1) * shadowsPerCall)
            return {
              slice,
              call: Scripts.renewShadows({ pulse }, {
                sessionId,
                remaining,
                margin: marginOf(ttl),
                shadowBase: k.shadowBase,
                leasePrefix: k.leasePrefix,
                slotList: slice.flatMap((i) => [work[i]!.tag, work[i]!.registration, knownIn(work[i]!.tag)]).join(",")
              })
            }
          })
        )
        const byNode = Effect.flatMap(runAll("keepAlive", batches.map((b) => b.call)), (replies) => {
          const moved: Array<number> = []
          batches.forEach(({ slice }, j) =>
            replies[j]!.forEach((reply, m) => {
              if (reply === "moved") moved.push(slice[m]!)
              else answer(slice[m]!, [reply[0], [], reply[1], reply[2]])
            })
          )
          return oneByOne(moved)
        })
        return Effect.all([byNode, oneByOne(alone)], { concurrency: "unbounded", discard: true })
      }
      const knownIn = (tag: string) => knownBySlot.get(tag) ?? ""
      const leftEarly = fresh || homePick === undefined ? [] : [...missedAt(homePick.slice, missedAtHome), ...missedEarly.flat()]
      const batches = Effect.forEach(picks, walk, { concurrency: "unbounded" })
      // The slots a call did not renew go one by one after it; the others at once.
      yield* Effect.all([
        Effect.flatMap(batches, (missed) => renewEach(missed.flat(), knownIn)),
        renewEach([...plan.others, ...leftEarly], knownIn)
      ], { concurrency: "unbounded", discard: true })
      // Every call succeeded: the slices walked are fresh from this renewal's start.
      plan.rounds++
      const walked = fresh ? picks : [...(homePick === undefined ? [] : [{ pulse: plan.home, ...homePick }]), ...early]
      for (const { pulse, walks } of walked) for (const j of walks) pulse.walkedAt[j] = startedAt
      // What a slot answered, or "unchanged at the known version" for one a pulse's call renewed.
      const replyAt = (i: number): Schema.Schema.Type<typeof Replies.SlotRenewed> =>
        answers.get(i) ?? (work[i]!.registration === "" ? [[], [], "", ""] : [0, [], "", knownIn(work[i]!.tag)])
      // Unchanged: every pulse counts as `known` says (no lease set relying on it changed; one `known`
      // does not name yet has counted none), and the slots asked still hold leases at the versions
      // `known` names, none listed.
      let unchanged = known !== undefined &&
        [...counts].every(([tag, count]) => (plan.knownCounts.get(tag) ?? noChanges(count)) === count)
      let holding = plan.registered
      for (const [i, [leases, , prune, version]] of answers) {
        if (leases !== 0 && leases.length > 0) unchanged = false
        if (work[i]!.registration === "") continue
        if (prune !== "") holding--
        else if (version !== knownIn(work[i]!.tag)) unchanged = false
      }
      if (holding !== knownBySlot.size) unchanged = false
      // A group renewed twice (its node's call, then that slot's own call) is listed once.
      const groupViewsOf = () => [
        ...new Map(
          [...batchViews, ...[...answers.values()].map((reply) => reply[1])].flatMap(groupViews).map((view) => [view.group, view])
        ).values()
      ]
      if (unchanged) {
        return { remaining: Duration.millis(remaining), version: known!, leases: undefined, groups: groupViewsOf() }
      }
      const again = work.flatMap((_, i) => replyAt(i)[0] === 0 ? [i] : [])
      yield* renewEach(again, () => "")
      const replies = work.map((_, i) => replyAt(i))
      const slotPart = joinPairs(
        work.flatMap((w, i) => w.registration === "" || replies[i]![2] !== "" ? [] : [[w.tag, replies[i]![3]] as const])
      )
      const forgotten = replies.flatMap((reply, i) => reply[2] === "" ? [] : [work[i]!.tag, reply[2]])
      if (forgotten.length > 0) {
        yield* run("keepAlive", Scripts.forgetSlots({ home: k.session(sessionId), homeSlots }, { registrations: forgotten }))
      }
      return {
        remaining: Duration.millis(remaining),
        version: `${slotPart}|${joinPairs(counts)}`,
        leases: replies.flatMap(([leases]) => leases === 0 ? [] : heldLeases(leases)),
        groups: groupViewsOf()
      }
    })

  /** Cluster: the home first (from then on everything answers `Expired`), then slot by slot. */
  const closeBySlot = (sessionId: string): Effect.Effect<void, BackendError> =>
    Effect.gen(function*() {
      forget(sessionId)
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

  return { renew: renewBySlot, close: closeBySlot, pulseFor }
}
