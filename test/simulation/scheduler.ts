/**
 * The seeded scheduler of the simulation: a world of a few clients, each a pure `Engine` state driven
 * by `Engine.step` (no Effect runtime), talking to the model backend (`model.ts`) through a faulty
 * network, under one true global time. Everything random comes from one seeded generator, so a seed
 * replays exactly.
 *
 * One seed is three phases:
 * 1. **faults** `[0, Q)`: users start, stop and step down elections and locks, join and leave a partition
 *    group, close clients; the scheduler loses requests and replies (the client then sees `Failed` after
 *    the call's `timeout`, on its own clock), delays and reorders them (some past the timeout, so the
 *    backend acts on a request its client gave up on), fails calls fast or ambiguously (processed, but
 *    reported failed), loses hints, partitions clients from the backend (long enough for the backend to
 *    expire their sessions), pauses processes (timers and replies pile up and are handled at once when
 *    the pause ends, on a clock that kept running), crashes clients (the process vanishes, its session
 *    expires on the backend) and restarts them (a fresh engine state and clock), and, rarely, makes the
 *    backend end a session early or lose a lease. Each client's clock runs at a rate that changes over
 *    time anywhere within `drift` of the backend's (extremes included).
 * 2. **quiet** `[Q, E)`: no faults and no user actions (work still exits), short delays (≤ `d`).
 *    Liveness bound: a name with a contender (an election that is CANDIDATE or LEADER in a running
 *    client) has a valid term within
 *      `bound = (leaseDuration + 2 × renewInterval) / (1 − drift) + maxDelay + 4d`
 *    of `Q` (or of the moment it became contended without a leader, if later). Why: the lease of a
 *    crashed, paused or partitioned holder expires at most `leaseDuration` after its last renewal, which
 *    a request delayed by the faults can still deliver up to `maxDelay` after `Q`; a handover holds the
 *    lease at most to its deadline (< `leaseDuration`); a lease that a live session holds with no
 *    election wanting it is released at its next renewal (`renewInterval`); candidates retry within
 *    `renewInterval / 2 + retryJitter ≤ 1.5 × renewInterval` (here `retryJitter ≤ renewInterval`; local
 *    time, hence the `1 − drift`), and a few round trips of at most `2d` each follow. The worst gap observed is printed as a fraction of it.
 * 3. **close** from `E`: every client is closed; all completions must complete and all terms be revoked.
 */
import { pathToFileURL } from "node:url"
import * as EngineModule from "../../src/Engine.js"
import * as LeaseName from "../../src/LeaseName.js"
import type { Timing } from "../../src/Session.js"
import { Checker, type CompletionKind, fmt, formatRequest, formatResponse, SimulationFailure, Violation } from "./checker.js"
import { ModelBackend } from "./model.js"

export type EngineApi = Pick<typeof EngineModule, "initial" | "step">

/** `src/Engine.ts`, or the module `SIM_ENGINE` names (a mutant written by `mutate.ts`). */
export const loadEngine = async (): Promise<EngineApi> => {
  const path = process.env["SIM_ENGINE"]
  return path === undefined || path === "" ? EngineModule : await import(pathToFileURL(path).href) as EngineApi
}

// ---------------------------------------------------------------------------------------------------
// Seeded randomness
// ---------------------------------------------------------------------------------------------------

/** splitmix32 to spread seeds, then mulberry32. */
export class Rng {
  private state: number
  constructor(seed: number) {
    let z = (seed + 0x9e3779b9) >>> 0
    z = Math.imul(z ^ (z >>> 16), 0x85ebca6b) >>> 0
    z = Math.imul(z ^ (z >>> 13), 0xc2b2ae35) >>> 0
    this.state = (z ^ (z >>> 16)) >>> 0
  }
  next(): number {
    this.state = (this.state + 0x6d2b79f5) >>> 0
    let t = this.state
    t = Math.imul(t ^ (t >>> 15), t | 1)
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61)
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296
  }
  range(lo: number, hi: number): number {
    return lo + (hi - lo) * this.next()
  }
  int(lo: number, hi: number): number {
    return lo + Math.floor((hi - lo + 1) * this.next())
  }
  chance(p: number): boolean {
    return p > 0 && this.next() < p
  }
  pick<A>(xs: ReadonlyArray<A>): A {
    return xs[Math.floor(this.next() * xs.length)]!
  }
  /** Exponential with the given mean. */
  exp(mean: number): number {
    return -mean * Math.log(1 - this.next())
  }
  fork(): Rng {
    return new Rng(Math.floor(this.next() * 4294967296))
  }
}

// ---------------------------------------------------------------------------------------------------
// Client clocks: piecewise linear in true time, rate within [1 - drift, 1 + drift]
// ---------------------------------------------------------------------------------------------------

interface Segment {
  readonly t: number
  readonly l: number
  readonly r: number
}

export class LocalClock {
  private readonly segs: Array<Segment>
  constructor(private readonly rng: Rng, private readonly drift: number, start: number, offset: number) {
    this.segs = [{ t: start, l: offset, r: this.rate() }]
  }
  private rate(): number {
    const u = this.rng.next()
    if (u < 0.3) return 1 - this.drift
    if (u < 0.55) return 1 + this.drift
    if (u < 0.65) return 1
    return 1 + this.drift * (2 * this.rng.next() - 1)
  }
  private grow(): void {
    const last = this.segs[this.segs.length - 1]!
    const d = this.rng.range(50, 3000)
    this.segs.push({ t: last.t + d, l: last.l + last.r * d, r: this.rate() })
  }
  /** Local monotonic reading at true time `t`. */
  local(t: number): number {
    while (this.segs[this.segs.length - 1]!.t <= t) this.grow()
    let lo = 0
    let hi = this.segs.length - 1
    while (lo < hi) {
      const mid = (lo + hi + 1) >> 1
      if (this.segs[mid]!.t <= t) lo = mid
      else hi = mid - 1
    }
    const s = this.segs[lo]!
    return s.l + s.r * (t - s.t)
  }
  /** The first true time (≥ `from`) at which the local clock reads at least `l`. */
  trueAt(l: number, from: number): number {
    while (this.segs[this.segs.length - 1]!.l <= l) this.grow()
    let lo = 0
    let hi = this.segs.length - 1
    while (lo < hi) {
      const mid = (lo + hi + 1) >> 1
      if (this.segs[mid]!.l <= l) lo = mid
      else hi = mid - 1
    }
    const s = this.segs[lo]!
    let t = Math.max(from, s.t + (l - s.l) / s.r)
    for (let i = 0; this.local(t) < l; i++) t += i < 4 ? Math.max(1e-9, Math.abs(t) * 1e-15) * 2 ** (i * 8) : 1e-3
    return t
  }
}

// ---------------------------------------------------------------------------------------------------
// Event queue
// ---------------------------------------------------------------------------------------------------

interface Item {
  readonly time: number
  readonly seq: number
  readonly run: () => void
  cancelled: boolean
}

class Queue {
  private readonly heap: Array<Item> = []
  private seq = 0
  get size(): number {
    return this.heap.length
  }
  push(time: number, run: () => void): Item {
    const item: Item = { time, seq: this.seq++, run, cancelled: false }
    const h = this.heap
    h.push(item)
    let i = h.length - 1
    while (i > 0) {
      const p = (i - 1) >> 1
      if (less(h[p]!, item)) break
      h[i] = h[p]!
      i = p
    }
    h[i] = item
    return item
  }
  pop(): Item | undefined {
    const h = this.heap
    const top = h[0]
    if (top === undefined) return undefined
    const last = h.pop()!
    if (h.length > 0) {
      let i = 0
      for (;;) {
        const l = 2 * i + 1
        if (l >= h.length) break
        const r = l + 1
        const c = r < h.length && less(h[r]!, h[l]!) ? r : l
        if (less(last, h[c]!)) break
        h[i] = h[c]!
        i = c
      }
      h[i] = last
    }
    return top
  }
}

const less = (a: Item, b: Item): boolean => a.time < b.time || (a.time === b.time && a.seq < b.seq)

// ---------------------------------------------------------------------------------------------------
// Seed parameters
// ---------------------------------------------------------------------------------------------------

interface NetProfile {
  readonly lossRequest: number
  readonly lossReply: number
  readonly fastFail: number
  readonly ambiguous: number
  readonly baseDelay: number
  readonly slowChance: number
  readonly slowMax: number
  readonly hintLoss: number
}

export interface SeedParams {
  readonly timing: Timing
  readonly clients: number
  readonly names: ReadonlyArray<string>
  readonly group: { readonly name: string; readonly partitions: number } | undefined
  /**
   * A semaphore of `limit` permits or a read-write lock named `p` that clients take holds of (and, for
   * a read-write lock, write locks: plain locks of `p`), or none.
   */
  readonly pool: { readonly name: string; readonly kind: "semaphore" | "rw"; readonly limit: number } | undefined
  readonly hints: boolean
  readonly heldByRemaining: boolean
  /** The model backend hands freed leases to its first waiter (see `ModelOptions.handOff`). */
  readonly handOff: boolean
  readonly maxTtl: number
  readonly faultEnd: number
  readonly quietEnd: number
  readonly end: number
  readonly bound: number
  readonly net: NetProfile
  readonly quietNet: NetProfile
  /** Per-client mean time between faults of each kind (Infinity: none). */
  readonly pauseEvery: number
  readonly partitionEvery: number
  readonly crashEvery: number
  readonly closeWeight: number
  readonly forcedExpiries: number
  readonly leaseLosses: number
  readonly actionEvery: number
}

/** A seed's pool, drawn apart from its other parameters (which stay those of the seed without pools). */
const pickPool = (seed: number): SeedParams["pool"] => {
  const rng = new Rng(seed ^ 0x5ea90e)
  if (!rng.chance(0.3)) return undefined
  return rng.chance(0.5) ? { name: "p", kind: "semaphore", limit: rng.int(1, 4) } : { name: "p", kind: "rw", limit: 0 }
}

/**
 * How long one request of a pool may take its turn once the faults ended: a body of at most 1.5 L
 * (true time), a write lock's cache (`keep` < L; a semaphore has no write locks), and the release and
 * the next grant reaching the next holder (within the liveness bound).
 */
const poolTurn = (pool: NonNullable<SeedParams["pool"]>, leaseDuration: number, bound: number): number =>
  1.5 * leaseDuration + (pool.kind === "rw" ? leaseDuration : 0) + bound
/** The most requests a pool may have for its starvation check (more: the check is skipped). */
const maxTurns = 4

const pickParams = (rng: Rng, seed: number): SeedParams => {
  const leaseDuration = rng.pick([300, 600, 1000, 1500, 3000])
  const drift = rng.pick([0, 0.001, 0.01, 0.05, 0.1, 0.2, 0.3])
  const margin = rng.pick([1, 2, 5, 20, 50].filter((m) => m < leaseDuration / 20))
  const renewInterval = Math.round(leaseDuration * rng.pick([0.25, 1 / 3, 0.4, 0.5]))
  const timing: Timing = {
    leaseDuration,
    renewInterval,
    drift,
    margin,
    retryJitter: renewInterval * rng.pick([0, 0.25, 0.5, 0.5, 1]),
    minBackoff: rng.pick([5, 20, 50, 100].filter((b) => b < renewInterval / 2))
  }
  if (!(renewInterval * 2 <= leaseDuration && leaseDuration * (1 - drift) - margin > renewInterval)) {
    throw new Error(`bad timing ${JSON.stringify(timing)}`)
  }
  const harsh = rng.pick([0, 1, 1, 2, 2, 3])
  const level = [0, 0.03, 0.1, 0.25][harsh]!
  const L = leaseDuration
  const slowMax = renewInterval * 1.5
  const net: NetProfile = {
    lossRequest: rng.range(0, level),
    lossReply: rng.range(0, level),
    fastFail: rng.range(0, level / 2),
    ambiguous: rng.range(0, level / 2),
    baseDelay: rng.pick([1, 5, 20, L / 20]),
    slowChance: rng.range(0, level),
    slowMax,
    hintLoss: rng.range(0, level * 2)
  }
  const quietNet: NetProfile = {
    lossRequest: 0,
    lossReply: 0,
    fastFail: 0,
    ambiguous: 0,
    baseDelay: Math.min(5, L / 100),
    slowChance: 0,
    slowMax: 0,
    hintLoss: 0
  }
  const faultEnd = L * rng.range(3, 7)
  const maxDelay = Math.max(net.baseDelay, slowMax) + net.baseDelay
  const bound = (L + 2 * renewInterval) / (1 - drift) + maxDelay + 4 * quietNet.baseDelay
  const quietEnd = faultEnd + bound + L / 4
  const every = (on: boolean, mean: number) => on ? mean : Infinity
  const names = ["a", "b", "c"].slice(0, rng.int(1, 3))
  return {
    timing,
    clients: rng.int(2, 4),
    names,
    group: rng.chance(0.3) ? { name: "g", partitions: rng.int(2, 4) } : undefined,
    pool: pickPool(seed),
    hints: rng.chance(0.6),
    heldByRemaining: rng.chance(0.7),
    maxTtl: rng.chance(0.15) ? L * rng.range(0.5, 1) : Infinity,
    faultEnd,
    quietEnd,
    end: quietEnd + 2 * L / (1 - drift) + renewInterval,
    bound,
    net,
    quietNet,
    pauseEvery: every(harsh > 0 && rng.chance(0.7), L * rng.range(2, 8)),
    partitionEvery: every(harsh > 0 && rng.chance(0.5), L * rng.range(3, 10)),
    crashEvery: every(harsh > 0 && rng.chance(0.4), L * rng.range(3, 10)),
    closeWeight: rng.chance(0.3) ? 0.3 : 0,
    forcedExpiries: harsh >= 2 && rng.chance(0.25) ? rng.int(1, 2) : 0,
    leaseLosses: harsh >= 2 && rng.chance(0.25) ? rng.int(1, 2) : 0,
    actionEvery: L * rng.range(0.3, 1.5),
    handOff: rng.chance(0.5)
  }
}

// ---------------------------------------------------------------------------------------------------
// The world
// ---------------------------------------------------------------------------------------------------

interface HandleInfo {
  readonly handle: number
  readonly name: string
  readonly kind: "election" | "lock"
  readonly hasWork: boolean
  /** A lock's `keep` (lock caching), if it has one. */
  readonly keep: number | undefined
  started: boolean
  stopping: boolean
  elected: boolean
}

interface WorkPlan {
  readonly prompt: boolean
  exitItem: Item | undefined
  exited: boolean
}

interface Incarnation {
  readonly client: number
  readonly inc: number
  state: EngineModule.State
  readonly clock: LocalClock
  readonly timers: Map<string, Item>
  pausedUntil: number
  readonly pile: Array<EngineModule.Event>
  steps: number
  nextHandle: number
  nextCompletion: number
  readonly handles: Map<number, HandleInfo>
  groupHandle: number | undefined
  closing: boolean
  closed: boolean
  readonly work: Map<number, WorkPlan>
  readonly completions: Map<number, { readonly kind: CompletionKind; readonly handle: number | undefined }>
}

interface Slot {
  readonly client: number
  current: Incarnation | undefined
  incarnations: number
  readonly partitions: Array<readonly [number, number]>
}

export interface SeedResult {
  readonly seed: number
  /** Scheduler events processed (engine steps, backend operations, faults, actions). */
  readonly events: number
  readonly steps: number
  readonly terms: number
  readonly stats: ReadonlyMap<string, number>
  readonly maxGap: number
  /** The whole trace, when `fullTrace` was asked. */
  readonly trace: string | undefined
  readonly bound: number
}

export interface RunOptions {
  /** Trace entries kept for a failure report (default 80). */
  readonly traceSize?: number
  /** Keep and report the whole trace (replays). */
  readonly fullTrace?: boolean
  /** Check the engine rules R1-R4 besides the properties (default true). */
  readonly rules?: boolean
}

type Ev = EngineModule.Event
type CallCommand = Extract<EngineModule.Command, { _tag: "Call" }>

class World {
  readonly rng: Rng
  readonly p: SeedParams
  readonly queue = new Queue()
  readonly model: ModelBackend
  readonly checker: Checker
  readonly slots: Array<Slot>
  now = 0
  events = 0
  steps = 0
  /** The end of the quiet phase: `p.quietEnd`, later for a pool whose turns are checked (`checkTurns`). */
  quietEnd: number
  /** Pool requests whose wait `checkTurns` bounds, by client/incarnation/handle. */
  readonly turns = new Map<string, { readonly from: number; readonly allowed: number }>()
  /** The item that closes every client at `quietEnd`. */
  closing: Item | undefined = undefined

  constructor(readonly engine: EngineApi, readonly seed: number, options: RunOptions) {
    this.rng = new Rng(seed)
    this.p = pickParams(this.rng, seed)
    this.quietEnd = this.p.quietEnd
    this.model = new ModelBackend({ maxTtl: this.p.maxTtl, heldByRemaining: this.p.heldByRemaining, handOff: this.p.handOff })
    this.checker = new Checker(
      (client, inc, t) => {
        const c = this.slots[client]!.current
        // A term only exists for the live incarnation (dead ones are marked by `crashed`).
        return c !== undefined && c.inc === inc ? c.clock.local(t) : Infinity
      },
      options.traceSize ?? 80,
      options.fullTrace ?? false,
      options.rules ?? true
    )
    this.slots = Array.from({ length: this.p.clients }, (_, client) => ({
      client,
      current: undefined,
      incarnations: 0,
      partitions: []
    }))
  }

  get faulty(): boolean {
    return this.now < this.p.faultEnd
  }

  at(time: number, run: () => void): Item {
    return this.queue.push(Math.max(time, this.now), run)
  }

  note(text: string | (() => string)): void {
    this.checker.note(this.now, text)
  }

  // -------------------------------------------------------------------------------------------------
  // Run
  // -------------------------------------------------------------------------------------------------

  run(): SeedResult {
    const { p } = this
    const T = p.timing
    this.note(
      `seed ${this.seed}: ${p.clients} clients, names [${p.names.join(" ")}]${
        p.group ? `, group ${p.group.name}/${p.group.partitions}` : ""
      }${p.pool === undefined ? "" : p.pool.kind === "rw" ? ", read-write lock p" : `, semaphore p of ${p.pool.limit}`}, timing ${JSON.stringify(T)}, hints ${p.hints}, heldBy.remaining ${p.heldByRemaining}, hand-off ${p.handOff}, maxTtl ${
        fmt(p.maxTtl)
      }, faults until ${fmt(p.faultEnd)}, quiet until ${fmt(p.quietEnd)}, liveness bound ${fmt(p.bound)}`
    )
    for (const slot of this.slots) {
      this.at(this.rng.range(0, 20), () => this.boot(slot))
      this.planFaults(slot)
    }
    for (let i = 0; i < p.forcedExpiries; i++) this.at(this.rng.range(T.leaseDuration, p.faultEnd), () => this.forceExpire())
    for (let i = 0; i < p.leaseLosses; i++) this.at(this.rng.range(T.leaseDuration, p.faultEnd), () => this.loseLease())
    this.closing = this.at(p.quietEnd, () => this.closeAll())
    if (p.pool !== undefined) this.at(p.faultEnd + p.bound, () => this.checkTurns())
    this.checker.stableFrom = p.faultEnd + p.bound
    this.checker.stableUntil = p.quietEnd
    for (;;) {
      const item = this.queue.pop()
      if (item === undefined || item.time > this.quietEnd + (p.end - p.quietEnd)) break
      if (item.cancelled) continue
      this.now = item.time
      this.events++
      item.run()
      const led = this.checker.evaluate(this.now)
      if (this.now >= p.faultEnd && this.now < this.quietEnd) {
        const ledPools = new Map(Array.from(led, ([name, term]) => [LeaseName.poolOf(name), term] as const))
        this.checker.liveness(this.now, p.faultEnd, p.bound, this.contended(), ledPools)
      }
    }
    this.now = this.quietEnd + (p.end - p.quietEnd)
    this.checker.finish(
      this.slots.flatMap((s) => s.current === undefined ? [] : [{ client: s.client, inc: s.current.inc }])
    )
    return {
      seed: this.seed,
      events: this.events,
      steps: this.steps,
      terms: this.checker.termsAdopted,
      stats: this.checker.stats,
      trace: this.checker.full === undefined ? undefined : this.checker.formatTrace(true),
      maxGap: this.checker.maxGap,
      bound: p.bound
    }
  }

  /**
   * No starvation in a pool. Once the system settled, requests keep arriving for two turns
   * (no more than `maxTurns` alive at once), and every request waiting then or arriving then must
   * be granted within one `poolTurn` for each request alive when it began to wait (those before it
   * in the queue, and itself): grants follow arrival order and every body ends, so a request passed
   * again and again by later ones (a 3-permit request by 1-permit ones, a writer by readers) fails.
   */
  checkTurns(): void {
    const pool = this.p.pool!
    const turn = poolTurn(pool, this.p.timing.leaseDuration, this.p.bound)
    const arrivalsUntil = this.now + 2 * turn
    let latest = this.now
    const watch = (c: Incarnation, handle: number, name: string, requests: number) => {
      const allowed = requests * turn
      latest = Math.max(latest, this.now + allowed)
      this.checker.count("pool requests checked for their turn")
      this.turns.set(`${c.client}/${c.inc}/${handle}`, { from: this.now, allowed })
      this.at(this.now + allowed, () => {
        if (!this.alive(c) || c.closing || c.closed) return
        const e = Array.from(c.state.elections.values()).find((x) => x.handle === handle)
        if (e !== undefined && e.status === "CANDIDATE") {
          throw new Violation(
            `starvation: c${c.client}#${c.inc} still waits for ${name} at t=${fmt(this.now)}, ${fmt(allowed)} ms after it was one of ${requests} requests of ${pool.name}`
          )
        }
      })
    }
    const waiting = this.poolRequests().filter(({ status }) => status === "CANDIDATE")
    const alive = this.poolRequests().length
    for (const { c, handle, name } of waiting) watch(c, handle, name, alive)
    const arrive = (c: Incarnation) =>
      // Arrivals come often, so a rule that let later requests pass would starve someone.
      this.at(this.now + this.rng.exp(this.p.timing.leaseDuration / 10), () => {
        if (this.now >= arrivalsUntil || !this.alive(c) || c.closing || c.closed) return
        if (this.poolRequests().length < maxTurns) {
          const handle = c.nextHandle
          this.startPoolHandle(c)
          const started = Array.from(c.handles.values()).find((h) => h.handle === handle)
          if (started !== undefined) watch(c, handle, started.name, this.poolRequests().length)
        }
        arrive(c)
      })
    for (const slot of this.slots) {
      const c = slot.current
      if (c !== undefined && !c.closing && !c.closed) arrive(c)
    }
    // The quiet phase lasts until the last check (and a little after): the clients close only then.
    const closeAt = (end: number) => {
      this.quietEnd = end
      this.checker.stableUntil = end
      if (this.closing !== undefined) this.closing.cancelled = true
      this.closing = this.at(end, () => this.closeAll())
    }
    closeAt(arrivalsUntil + maxTurns * turn + this.p.timing.leaseDuration / 4)
    this.at(arrivalsUntil, () => closeAt(Math.max(this.p.quietEnd, this.now, latest) + this.p.timing.leaseDuration / 4))
  }

  /** The requests of the pool (holds and write locks) in the live clients' engines. */
  poolRequests(): Array<{ c: Incarnation; handle: number; name: string; status: string }> {
    const out: Array<{ c: Incarnation; handle: number; name: string; status: string }> = []
    for (const slot of this.slots) {
      const c = slot.current
      if (c === undefined || c.closing || c.closed) continue
      for (const e of c.state.elections.values()) {
        if (LeaseName.poolOf(e.name) === this.p.pool!.name) out.push({ c, handle: e.handle, name: e.name, status: e.status })
      }
    }
    return out
  }

  /** Names some healthy client competes for (a candidate or leader, not stopping or cooling down). */
  contended(): Set<string> {
    const out = new Set<string>()
    for (const slot of this.slots) {
      const c = slot.current
      if (c === undefined || c.closing || c.closed) continue
      for (const e of c.state.elections.values()) {
        // A pool counts as one name: some hold or writer of it must be granted (not each one: a
        // request waits its turn in arrival order).
        if (e.status === "CANDIDATE" || e.status === "LEADER") out.add(LeaseName.poolOf(e.name))
      }
    }
    return out
  }

  // -------------------------------------------------------------------------------------------------
  // Clients: delivery and steps
  // -------------------------------------------------------------------------------------------------

  boot(slot: Slot): void {
    if (slot.current !== undefined && !slot.current.closed) return
    const inc = ++slot.incarnations
    const c: Incarnation = {
      client: slot.client,
      inc,
      state: this.engine.initial(this.p.timing, Math.floor(this.rng.next() * 4294967296)),
      clock: new LocalClock(this.rng.fork(), this.p.timing.drift, this.now, this.rng.pick([0, 1e3, 1e6, 1e9]) * this.rng.next()),
      timers: new Map(),
      pausedUntil: -Infinity,
      pile: [],
      steps: 0,
      nextHandle: 1,
      nextCompletion: 1,
      handles: new Map(),
      groupHandle: undefined,
      closing: false,
      closed: false,
      work: new Map(),
      completions: new Map()
    }
    slot.current = c
    this.note(`c${slot.client}#${inc} boots`)
    this.deliver(c, { _tag: "Boot" })
    // Most clients compete for some names from the start; more come and go with the user actions.
    for (const name of this.p.names) {
      if (this.rng.chance(0.7)) this.startHandle(c, name, this.rng.chance(0.8) ? "election" : "lock")
    }
    if (this.p.group !== undefined && this.rng.chance(0.7)) this.joinGroup(c)
    if (this.p.pool !== undefined && this.rng.chance(0.7)) this.startPoolHandle(c)
    this.scheduleAction(c)
  }

  alive(c: Incarnation): boolean {
    return this.slots[c.client]!.current === c
  }

  deliver(c: Incarnation, event: Ev): void {
    if (!this.alive(c)) return
    if (this.now < c.pausedUntil) {
      c.pile.push(event)
      return
    }
    this.step(c, event)
  }

  step(c: Incarnation, event: Ev): void {
    const local = c.clock.local(this.now)
    const prev = c.state
    const [next, commands] = this.engine.step(prev, event, local)
    c.state = next
    c.steps++
    this.steps++
    this.checker.record({ _tag: "step", t: this.now, client: c.client, inc: c.inc, local, event, commands })
    for (const command of commands) this.perform(c, command)
    this.checker.afterStep({ t: this.now, client: c.client, inc: c.inc, step: c.steps, local, event, commands, prev })
  }

  perform(c: Incarnation, command: EngineModule.Command): void {
    switch (command._tag) {
      case "Call":
        return this.send(c, command)
      case "Arm": {
        const previous = c.timers.get(command.key)
        if (previous !== undefined) previous.cancelled = true
        const ev: Ev = { _tag: "Timer", key: command.key, id: command.id }
        const item: Item = this.at(c.clock.trueAt(command.at, this.now), () => {
          if (c.timers.get(command.key) !== item) return
          c.timers.delete(command.key)
          this.deliver(c, ev)
        })
        c.timers.set(command.key, item)
        return
      }
      case "Disarm": {
        const item = c.timers.get(command.key)
        if (item !== undefined) item.cancelled = true
        c.timers.delete(command.key)
        return
      }
      case "Elected":
        return this.onElected(c, command)
      case "Revoked":
        return this.onRevoked(c, command)
      case "Complete":
        return this.onComplete(c, command)
      default:
        return
    }
  }

  // -------------------------------------------------------------------------------------------------
  // Network
  // -------------------------------------------------------------------------------------------------

  partitioned(client: number, t: number): boolean {
    return this.slots[client]!.partitions.some(([a, b]) => a <= t && t < b)
  }

  delay(net: NetProfile): number {
    return this.rng.chance(net.slowChance) ? this.rng.range(0, net.slowMax) : this.rng.range(0, net.baseDelay)
  }

  send(c: Incarnation, call: CallCommand): void {
    const net = this.faulty ? this.p.net : this.p.quietNet
    const { rng } = this
    const deadlineLocal = call.sentAt + call.timeout
    const timeoutAt = c.clock.trueAt(deadlineLocal, this.now)
    const fail = (error: string): Ev => ({ _tag: "Reply", requestId: call.requestId, sentAt: call.sentAt, request: call.request, response: { _tag: "Failed", error } })
    if (this.partitioned(c.client, this.now) || rng.chance(net.lossRequest)) {
      this.checker.count("fault request lost")
      this.note(() => `c${c.client}#${c.inc} request #${call.requestId} ${formatRequest(call.request)} lost`)
      this.at(timeoutAt, () => this.deliver(c, fail("timed out")))
      return
    }
    if (rng.chance(net.fastFail)) {
      this.checker.count("fault fast failure")
      this.at(Math.min(timeoutAt, this.now + this.delay(net)), () => this.deliver(c, fail("connection refused")))
      return
    }
    const backendAt = this.now + this.delay(net)
    const replyLost = this.partitioned(c.client, backendAt) || rng.chance(net.lossReply)
    const ambiguous = rng.chance(net.ambiguous)
    const replyAt = backendAt + this.delay(net)
    const timely = !replyLost && c.clock.local(replyAt) < deadlineLocal
    if (!timely) this.checker.count(replyLost ? "fault reply lost" : "fault reply after timeout")
    if (ambiguous && timely) this.checker.count("fault ambiguous failure")
    this.at(backendAt, () => {
      const { hints, response } = this.model.apply(call.request, this.now)
      this.note(() =>
        `backend: c${c.client}#${c.inc} #${call.requestId} ${formatRequest(call.request)} -> ${formatResponse(response)}${
          timely ? "" : replyLost ? " (reply lost)" : " (reply too late: the client times out)"
        }`
      )
      this.broadcast(hints)
      if (timely) {
        this.at(replyAt, () =>
          this.deliver(
            c,
            ambiguous
              ? fail("connection reset")
              : { _tag: "Reply", requestId: call.requestId, sentAt: call.sentAt, request: call.request, response }
          ))
      }
    })
    if (!timely) this.at(timeoutAt, () => this.deliver(c, fail("timed out")))
  }

  broadcast(hints: ReadonlyArray<EngineModule.HintEvent>): void {
    if (!this.p.hints || hints.length === 0) return
    const net = this.faulty ? this.p.net : this.p.quietNet
    for (const slot of this.slots) {
      const c = slot.current
      if (c === undefined) continue
      for (const hint of hints) {
        if (this.partitioned(slot.client, this.now) || this.rng.chance(net.hintLoss)) continue
        this.at(this.now + this.delay(net), () => this.deliver(c, { _tag: "Hint", hint }))
      }
    }
  }

  // -------------------------------------------------------------------------------------------------
  // Users
  // -------------------------------------------------------------------------------------------------

  request(c: Incarnation, kind: CompletionKind, handle: number | undefined, make: (completion: number) => Ev): void {
    const completion = c.nextCompletion++
    c.completions.set(completion, { kind, handle })
    this.checker.expectCompletion(c.client, c.inc, completion, kind, handle)
    this.deliver(c, make(completion))
  }

  usable(c: Incarnation): boolean {
    return this.alive(c) && !c.closing && !c.closed && this.faulty
  }

  /**
   * A hold of the seed's pool (`withPermits` / `withReadLock`), or a write lock of a read-write lock;
   * rarely with another limit, which the store refuses (`Conflict`) while the pool lives.
   */
  startPoolHandle(c: Incarnation): void {
    const pool = this.p.pool!
    if (pool.kind === "rw") {
      if (this.rng.chance(0.35)) return this.startHandle(c, pool.name, "lock")
      return this.startHandle(c, pool.name, "lock", undefined, { mode: "read", weight: 1, limit: 0 })
    }
    const limit = this.rng.chance(0.05) ? pool.limit + 1 : pool.limit
    this.startHandle(c, pool.name, "lock", undefined, { mode: "permits", weight: this.rng.int(1, limit), limit })
  }

  startHandle(
    c: Incarnation,
    base: string,
    kind: "election" | "lock",
    keepAgain?: number,
    hold?: Pick<LeaseName.Hold, "mode" | "weight" | "limit">
  ): void {
    const handle = c.nextHandle++
    // A hold's lease name is its own, unique per request; holds are never cached.
    const name = hold === undefined ? base : LeaseName.holdName({ pool: base, ...hold, id: `c${c.client}.${c.inc}.${handle}` })
    // `withLock(..., { keep })`: the lease stays cached after the body (lock caching).
    const keep = hold !== undefined ? undefined : keepAgain ??
      (kind === "lock" && this.rng.chance(0.4) ? this.rng.range(1, this.p.timing.leaseDuration) : undefined)
    const info: HandleInfo = {
      handle,
      name,
      kind,
      hasWork: kind === "election" && this.rng.chance(0.6),
      keep,
      started: false,
      stopping: false,
      elected: false
    }
    c.handles.set(handle, info)
    // A lock of the pool's name may be refused as another kind or limit: its `refusal` completion.
    const refusal = kind === "lock" && this.p.pool !== undefined && base === this.p.pool.name ? c.nextCompletion++ : undefined
    if (refusal !== undefined) {
      c.completions.set(refusal, { kind: "refusal", handle })
      this.checker.expectCompletion(c.client, c.inc, refusal, "refusal", handle)
    }
    this.request(c, "start", handle, (completion) => ({
      _tag: "Start",
      handle,
      name,
      kind,
      hasWork: info.hasWork,
      completion,
      keep,
      refusal
    }))
    if (kind === "lock" && this.rng.chance(0.3)) {
      // `withLock(..., { timeout })`: give up if not elected in time.
      this.at(this.now + this.rng.range(0, 2 * this.p.timing.leaseDuration), () => {
        if (this.usable(c) && !info.elected && !info.stopping) this.stopHandle(c, info)
      })
    }
  }

  stopHandle(c: Incarnation, info: HandleInfo): void {
    info.stopping = true
    // A lock's stop may wait for its release (`awaitRelease`): answered by the release's reply.
    const awaitRelease = info.kind === "lock" && this.rng.chance(info.keep === undefined ? 0.5 : 0.2)
    this.request(c, "stop", info.handle, (completion) => ({ _tag: "Stop", handle: info.handle, completion, awaitRelease }))
    // A caching lock's name is often taken again by the same client soon after (its lease cached).
    if (info.keep !== undefined && this.rng.chance(0.7)) {
      this.at(this.now + this.rng.range(0, 1.2 * info.keep), () => {
        if (this.usable(c)) this.startHandle(c, info.name, "lock", this.rng.chance(0.8) ? info.keep : undefined)
      })
    }
  }

  joinGroup(c: Incarnation): void {
    const g = this.p.group!
    const handle = c.nextHandle++
    c.groupHandle = handle
    this.request(c, "join", handle, (completion) => ({
      _tag: "Join",
      handle,
      group: g.name,
      partitions: g.partitions,
      completion
    }))
  }

  scheduleAction(c: Incarnation): void {
    this.at(this.now + this.rng.exp(this.p.actionEvery), () => {
      if (!this.usable(c)) return
      this.action(c)
      this.scheduleAction(c)
    })
  }

  action(c: Incarnation): void {
    const { rng } = this
    const live = Array.from(c.handles.values()).filter((h) => h.started && !h.stopping)
    const elections = live.filter((h) => h.kind === "election")
    const choices: Array<[number, () => void]> = [
      [2, () => this.startHandle(c, rng.pick(this.p.names), "election")],
      [1.5, () => this.startHandle(c, rng.pick(this.p.names), "lock")],
      [this.p.pool !== undefined ? 2 : 0, () => this.startPoolHandle(c)],
      [live.length > 0 ? 2 : 0, () => this.stopHandle(c, rng.pick(live))],
      [elections.length > 0 ? 1.5 : 0, () => {
        const info = rng.pick(elections)
        this.request(c, "stepDown", info.handle, (completion) => ({
          _tag: "StepDown",
          handle: info.handle,
          cooldown: rng.chance(0.3) ? 0 : rng.range(0, this.p.timing.renewInterval),
          completion
        }))
      }],
      [this.p.group !== undefined && c.groupHandle === undefined ? 1 : 0, () => this.joinGroup(c)],
      [c.groupHandle !== undefined ? 0.5 : 0, () => {
        const handle = c.groupHandle!
        c.groupHandle = undefined
        this.request(c, "leave", handle, (completion) => ({ _tag: "Leave", handle, completion }))
      }],
      [this.p.closeWeight, () => {
        c.closing = true
        this.request(c, "close", undefined, (completion) => ({ _tag: "Close", completion }))
      }]
    ]
    const total = choices.reduce((sum, [w]) => sum + w, 0)
    let x = rng.next() * total
    for (const [w, run] of choices) {
      if ((x -= w) < 0) return run()
    }
  }

  onComplete(c: Incarnation, command: Extract<EngineModule.Command, { _tag: "Complete" }>): void {
    const pending = c.completions.get(command.completion)
    if (pending === undefined) return
    c.completions.delete(command.completion)
    if (pending.kind === "start" && command.outcome._tag === "Ok" && pending.handle !== undefined) {
      const info = c.handles.get(pending.handle)
      if (info !== undefined) info.started = true
    }
    if (pending.kind === "refusal" && pending.handle !== undefined) {
      // The engine removed the lock: nothing is left to stop.
      const info = c.handles.get(pending.handle)
      if (info !== undefined) info.stopping = true
      this.checker.count(`lock refused: ${command.outcome._tag}`)
    }
    if (pending.kind === "close" && !c.closed) {
      c.closed = true
      this.note(`c${c.client}#${c.inc} closed`)
      const slot = this.slots[c.client]!
      if (this.faulty) {
        this.at(Math.min(this.p.faultEnd, this.now + this.rng.range(0, 2 * this.p.timing.leaseDuration)), () => this.boot(slot))
      }
    }
  }

  onElected(c: Incarnation, command: Extract<EngineModule.Command, { _tag: "Elected" }>): void {
    const info = c.handles.get(command.handle)
    const turn = this.turns.get(`${c.client}/${c.inc}/${command.handle}`)
    if (turn !== undefined) {
      this.turns.delete(`${c.client}/${c.inc}/${command.handle}`)
      const share = Math.min(9, Math.floor(10 * (this.now - turn.from) / turn.allowed))
      this.checker.count(`pool request granted within ${share * 10}-${share * 10 + 10}% of its allowance`)
    }
    if (info !== undefined) {
      info.started = true
      info.elected = true
      if (info.kind === "lock") {
        // The lock's body runs, then `withLock` stops it (user actions stop at the quiet phase; the
        // bodies of a pool's holds and write locks still end then, so its queue drains).
        const hold = this.rng.range(0, this.p.timing.leaseDuration * 1.5)
        const ofPool = this.p.pool !== undefined && LeaseName.poolOf(info.name) === this.p.pool.name
        this.at(this.now + hold, () => {
          const going = this.usable(c) || (ofPool && this.alive(c) && !c.closing && !c.closed)
          if (going && !info.stopping) this.stopHandle(c, info)
        })
      }
    }
    const hasWork = command.handle < 0 || info?.hasWork === true
    if (!hasWork) return
    const u = this.rng.next()
    const plan: WorkPlan = { prompt: u < 0.75, exitItem: undefined, exited: false }
    c.work.set(command.termId, plan)
    if (u > 0.85) {
      // The work finishes on its own while the term goes on.
      // Half of those fail: the shell then asks the engine to step down for a backoff.
      const stepDown = this.rng.next() < 0.5 ? this.rng.range(0, 2 * this.p.timing.leaseDuration) : undefined
      plan.exitItem = this.at(
        this.now + this.rng.range(0, 2 * this.p.timing.leaseDuration),
        () => this.workExit(c, command.handle, command.termId, stepDown)
      )
    }
  }

  onRevoked(c: Incarnation, command: Extract<EngineModule.Command, { _tag: "Revoked" }>): void {
    const plan = c.work.get(command.termId)
    if (plan === undefined || plan.exited) return
    if (plan.exitItem !== undefined) plan.exitItem.cancelled = true
    // Interrupted: most work exits at once, some only after a while (an uninterruptible region).
    const delay = plan.prompt ? this.rng.range(0, 30) : this.rng.range(0, 1.5 * this.p.timing.leaseDuration)
    plan.exitItem = this.at(this.now + delay, () => this.workExit(c, command.handle, command.termId))
  }

  workExit(c: Incarnation, handle: number, termId: number, stepDown?: number): void {
    const plan = c.work.get(termId)
    if (plan === undefined || plan.exited) return
    plan.exited = true
    c.work.delete(termId)
    this.deliver(c, { _tag: "WorkExited", handle, termId, stepDown })
  }

  closeAll(): void {
    for (const slot of this.slots) {
      const c = slot.current
      if (c === undefined || c.closing || c.closed) continue
      c.closing = true
      this.note(`c${c.client}#${c.inc} closes (final phase)`)
      this.request(c, "close", undefined, (completion) => ({ _tag: "Close", completion }))
    }
  }

  // -------------------------------------------------------------------------------------------------
  // Faults
  // -------------------------------------------------------------------------------------------------

  planFaults(slot: Slot): void {
    const { p, rng } = this
    const L = p.timing.leaseDuration
    for (let t = rng.exp(p.pauseEvery); t < p.faultEnd; t += rng.exp(p.pauseEvery)) {
      const length = Math.min(rng.range(p.timing.renewInterval / 4, 2.5 * L), p.faultEnd - t)
      this.at(t, () => this.pause(slot, length))
    }
    for (let t = rng.exp(p.partitionEvery); t < p.faultEnd; t += rng.exp(p.partitionEvery)) {
      const length = Math.min(rng.range(p.timing.renewInterval / 2, 2.5 * L), p.faultEnd - t)
      slot.partitions.push([t, t + length])
      this.at(t, () => {
        this.checker.count("fault partition")
        this.note(`FAULT c${slot.client} partitioned from the backend for ${fmt(length)} ms`)
      })
    }
    for (let t = rng.exp(p.crashEvery); t < p.faultEnd; t += rng.exp(p.crashEvery)) {
      const down = rng.range(0, 3 * L)
      this.at(t, () => this.crash(slot, down))
    }
  }

  pause(slot: Slot, length: number): void {
    const c = slot.current
    if (c === undefined) return
    const until = this.now + length
    if (until <= c.pausedUntil) return
    c.pausedUntil = until
    this.checker.count("fault pause")
    this.note(`FAULT c${c.client}#${c.inc} paused for ${fmt(length)} ms`)
    this.at(until, () => {
      if (!this.alive(c) || this.now < c.pausedUntil) return
      this.note(`c${c.client}#${c.inc} resumes with ${c.pile.length} piled-up events`)
      const pile = c.pile.splice(0)
      for (const event of pile) {
        if (this.alive(c)) this.step(c, event)
      }
    })
  }

  crash(slot: Slot, down: number): void {
    const c = slot.current
    if (c === undefined) return
    this.checker.count("fault crash")
    this.note(`FAULT c${c.client}#${c.inc} crashes${c.closed ? " (already closed)" : ""}; restarts in ${fmt(down)} ms`)
    this.checker.crashed(c.client, c.inc, this.now)
    for (const item of c.timers.values()) item.cancelled = true
    slot.current = undefined
    this.at(Math.min(this.now + down, this.p.faultEnd), () => this.boot(slot))
  }

  forceExpire(): void {
    const live = this.model.liveSessions(this.now)
    if (live.length === 0) return
    const sessionId = this.rng.pick(live)
    this.checker.exemptSession(sessionId, "session ended early by the backend")
    const { hints, leases } = this.model.forceExpire(sessionId, this.now)
    this.checker.count("fault session ended early")
    this.note(`FAULT backend ends session ${sessionId} early (held [${leases.map((l) => `${l.name}:${l.token}`).join(" ")}])`)
    this.broadcast(hints)
  }

  loseLease(): void {
    const held = this.model.heldLeases(this.now)
    if (held.length === 0) return
    const { name } = this.rng.pick(held)
    const lost = this.model.loseLease(name, this.now)
    if (lost === undefined) return
    this.checker.exemptLease(lost.holder, name, lost.token, "lease lost by the backend")
    this.checker.count("fault lease lost")
    this.note(`FAULT backend loses lease ${name}:${lost.token} of ${lost.holder}`)
    this.broadcast(lost.hints)
  }
}

/** Runs one seed; throws `SimulationFailure` with the seed and a trace on the first violation. */
export const runSeed = (engine: EngineApi, seed: number, options: RunOptions = {}): SeedResult => {
  const world = new World(engine, seed, options)
  try {
    return world.run()
  } catch (error) {
    const message = error instanceof Violation
      ? error.message
      : `the simulation crashed: ${error instanceof Error ? error.stack ?? error.message : String(error)}`
    throw new SimulationFailure(seed, `t=${fmt(world.now)}: ${message}`, world.checker.formatTrace(options.fullTrace ?? false))
  }
}

export interface BatchResult {
  readonly seeds: number
  readonly events: number
  readonly steps: number
  readonly terms: number
  readonly stats: ReadonlyMap<string, number>
  /** Largest leadership gap in a quiet phase, as a fraction of that seed's bound. */
  readonly worstGapRatio: number
  readonly millis: number
}

/** Runs `count` seeds from `first`; stops at the first failure (thrown). */
export const runSeeds = (engine: EngineApi, first: number, count: number, options: RunOptions = {}): BatchResult => {
  const started = performance.now()
  let events = 0
  let steps = 0
  let terms = 0
  let worst = 0
  const stats = new Map<string, number>()
  for (let seed = first; seed < first + count; seed++) {
    const r = runSeed(engine, seed, options)
    for (const [k, v] of r.stats) stats.set(k, (stats.get(k) ?? 0) + v)
    events += r.events
    steps += r.steps
    terms += r.terms
    worst = Math.max(worst, r.maxGap / r.bound)
  }
  return { seeds: count, events, steps, terms, stats, worstGapRatio: worst, millis: performance.now() - started }
}
