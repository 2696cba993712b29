/**
 * `SimbaTest`: the fault-injection kit for testing your own leader-only code, with `TestClock`, the
 * in-memory backend and no servers.
 *
 * - A **network** is one shared store (a fresh in-memory backend, or any `LeaseBackendService`).
 * - `makeClient(net, config)` builds a Simba client whose backend calls go through its own faulty
 *   link, and returns the client with its `faults` remote control: `pause`/`resume`, `slow`, `fail`,
 *   `drop`, `partition`/`heal`, `expireSession`, `notify`. Faults affect that client only; `calls`
 *   lists every backend call it made.
 * - `FencedStore` is a reference storage service that accepts a write only with a fencing token at
 *   least as high as the highest it has seen, and remembers every accepted and rejected write.
 * - `recorder` records who led what, when (per client, from terms), and `checkNoOverlap` checks that
 *   no two terms of a name overlapped in time and that tokens rose.
 * - `advance` moves `TestClock` forward in steps, so every client's chain of timers and backend calls
 *   runs at the right virtual instant and has finished when it returns.
 *
 * A leader paused past its lease, and the fence that stops it:
 *
 * ```ts
 * import { Effect, Fiber } from "effect"
 * import { SimbaTest } from "simba"
 *
 * it.scoped("a stalled leader cannot write", () =>           // it.scoped provides TestClock
 *   Effect.gen(function*() {
 *     const net = yield* SimbaTest.network
 *     const [a, b] = yield* SimbaTest.makeClients(net, 2, { leaseDuration: "3 seconds" })
 *     const store = yield* SimbaTest.FencedStore.make<string>()
 *
 *     const termA = yield* a.client.lock("orders")            // a holds the lock
 *     yield* a.faults.pause()                                 // a stalls: its renewals never arrive
 *     const bWrites = yield* Effect.fork(b.client.withLock("orders", (term) => store.write(term, "b")))
 *     yield* SimbaTest.advance("5 seconds")                   // a's lease runs out, b takes over
 *     expect(yield* Fiber.join(bWrites)).toBe(true)
 *     expect(yield* termA.isValid).toBe(false)                // a knows without any I/O
 *     expect(yield* store.write(termA, "a, late")).toBe(false) // and the fence refuses it anyway
 *   }))
 * ```
 *
 * Your own leader-only code, checked for overlap across clients and faults:
 *
 * ```ts
 * const recorder = yield* SimbaTest.recorder
 * const clients = yield* SimbaTest.makeClients(net, 3, config)
 * for (const [i, c] of clients.entries()) {
 *   yield* Effect.forkScoped(c.client.runWhileLeader("billing", recorder.track(`client-${i}`, billingLoop)))
 * }
 * yield* SimbaTest.advance("10 seconds")
 * yield* clients[0].faults.partition                          // cut the leader off ...
 * yield* SimbaTest.advance("10 seconds")
 * yield* recorder.assertNoOverlap                             // ... never two leaders at once
 * ```
 *
 * All delays use Effect's `Clock`, so `TestClock` drives them. With the live clock the kit works the
 * same in real time (`advance` excepted: it moves `TestClock`), over any backend, a real server
 * included (`networkOver(backend)`, `faulty(backend)`).
 */
import * as Arr from "effect/Array"
import * as Clock from "effect/Clock"
import * as Data from "effect/Data"
import * as Deferred from "effect/Deferred"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as ExecutionStrategy from "effect/ExecutionStrategy"
import * as Fiber from "effect/Fiber"
import * as Option from "effect/Option"
import * as PubSub from "effect/PubSub"
import * as Ref from "effect/Ref"
import * as Scope from "effect/Scope"
import * as Stream from "effect/Stream"
import * as TestClock from "effect/TestClock"
import { make as makeSimbaClient, type SimbaClient } from "./Simba.js"
import type { SimbaConfigError } from "./Errors.js"
import {
  BackendError,
  type Hint,
  LeaseBackend,
  type LeaseBackendService
} from "./LeaseBackend.js"
import * as MemoryBackend from "./layers/Memory.js"
import type { SimbaConfigInput } from "./SimbaConfig.js"
import type { SimbaEvent } from "./SimbaEvent.js"
import type { Term } from "./Term.js"

// ---------------------------------------------------------------------------------------------------
// Network and clients
// ---------------------------------------------------------------------------------------------------

/** The shared store the test clients talk to. Calls made on `backend` directly bypass every fault. */
export interface Network {
  readonly backend: LeaseBackendService
}

/** A network on a fresh in-memory backend (time from `Clock`, so `TestClock` drives it). */
export const network: Effect.Effect<Network> = Effect.map(MemoryBackend.make(), (backend) => ({ backend }))

/** A network on a fresh in-memory backend made with `options` (e.g. `{ maxTtl: "4 seconds" }`). */
export const networkWith = (options: MemoryBackend.Options): Effect.Effect<Network, SimbaConfigError> =>
  Effect.map(MemoryBackend.make(options), (backend) => ({ backend }))

/** A network on any backend: a real server in a real-time test, or a backend you wrapped yourself. */
export const networkOver = (backend: LeaseBackendService): Network => ({ backend })

/** A network on the `LeaseBackend` in context. */
export const networkFromContext: Effect.Effect<Network, never, LeaseBackend> = Effect.map(LeaseBackend, networkOver)

/** The backend operations a fault can be limited to. */
export type Operation =
  | "openSession"
  | "keepAlive"
  | "closeSession"
  | "acquire"
  | "release"
  | "withdraw"
  | "join"
  | "leave"
  | "members"

export interface FaultOptions {
  /** Limit the fault to these operations (default: every operation). */
  readonly only?: Operation | ReadonlyArray<Operation> | undefined
}

export interface SlowOptions extends FaultOptions {
  /**
   * `"reply"` (default): the call takes effect on the backend at once, its reply arrives `latency`
   * later. `"request"`: the request reaches the backend `latency` later (even if the client has given
   * up waiting by then, like a packet already on the wire); the reply is immediate.
   */
  readonly on?: "request" | "reply" | undefined
}

/** The remote control of one client's link to the backend. Every method affects that client only. */
export interface Faults {
  /**
   * Holds this client's requests in the network: calls hang. `resume` (or `heal`) delivers every held
   * request to the backend, in the order sent, whether or not the client still waits for the reply
   * (it gives up after its call timeout, one renew interval). Pausing a leader past its lease is how a
   * GC or VM pause looks to the rest of the cluster.
   */
  readonly pause: (options?: FaultOptions) => Effect.Effect<void>
  /**
   * Ends `pause`: delivers the held requests in order, then returns (a held request that is also
   * slowed is sent on its way, to arrive after its latency).
   */
  readonly resume: Effect.Effect<void>
  /** Adds `latency` to each call (see `SlowOptions`); `slow(0)` removes it. Whole milliseconds. */
  readonly slow: (latency: Duration.DurationInput, options?: SlowOptions) => Effect.Effect<void>
  /** Calls fail at once with `BackendError`, without reaching the backend. */
  readonly fail: (options?: FaultOptions) => Effect.Effect<void>
  /** Calls reach the backend and take effect, but their replies are lost: the client waits until its timeout. */
  readonly drop: (options?: FaultOptions) => Effect.Effect<void>
  /**
   * Cuts the client off: requests, replies and hints are lost; calls hang until the client's timeout.
   * Requests held by `pause` stay lost too.
   */
  readonly partition: Effect.Effect<void>
  /** Removes every fault (partition, pause, slow, fail, drop); held requests are delivered first. */
  readonly heal: Effect.Effect<void>
  /**
   * Ends this client's session(s) on the backend now (through `closeSession`, bypassing faults): the
   * backend forgets it, its next renewal (or acquire) answers `Expired`, its leases are free for others.
   *
   * This is an *early* loss, as after a failover that lost data or an operator deleting keys. The
   * `released` hint for a name the client leads makes it renew at once, so it learns within a round
   * trip; on a backend without hints, only at its next renewal, and until then only fencing protects
   * that window (a `recorder` reports the overlap). For a
   * session that runs out the normal way, cut the client off (`partition`, `pause`) for longer than
   * the lease instead.
   */
  readonly expireSession: Effect.Effect<void>
  /** Delivers a hint to this client only, as if the backend had pushed it (spurious or duplicate notifications). */
  readonly notify: (hint: Hint) => Effect.Effect<void>
}

/** One backend call a test client made, as recorded when it was sent. */
export interface CallRecord {
  readonly operation: Operation
  /** The session the call is for, if any. */
  readonly sessionId: string | undefined
  /** The lease or group name, if any. */
  readonly name: string | undefined
  /** When it was sent, in `Clock` milliseconds. */
  readonly at: number
  /** The fault that hit it when it was sent. */
  readonly fault: "partitioned" | "failed" | "paused" | "slowed" | undefined
}

/** A backend wrapped with a fault controller. */
export interface FaultyBackend {
  /** Use this as the client's `LeaseBackend`. */
  readonly backend: LeaseBackendService
  readonly faults: Faults
  /** Every call made through `backend`, in order. */
  readonly calls: Effect.Effect<ReadonlyArray<CallRecord>>
  /** Every session id `openSession` created on the backend through this link (even if the reply was lost). */
  readonly sessions: Effect.Effect<ReadonlyArray<string>>
}

type Selector = "none" | "all" | ReadonlySet<Operation>

interface Rules {
  readonly partitioned: boolean
  readonly paused: Selector
  readonly failing: Selector
  readonly dropping: Selector
  readonly slow: { readonly latency: number; readonly on: "request" | "reply"; readonly only: Selector }
}

const healthy: Rules = {
  partitioned: false,
  paused: "none",
  failing: "none",
  dropping: "none",
  slow: { latency: 0, on: "reply", only: "none" }
}

const selector = (options: FaultOptions | undefined): Selector => {
  const only = options?.only
  if (only === undefined) return "all"
  return new Set(typeof only === "string" ? [only] : only)
}

const matches = (selector: Selector, operation: Operation): boolean =>
  selector === "all" ? true : selector === "none" ? false : selector.has(operation)

const wholeMillis = (duration: Duration.DurationInput): number => {
  const millis = Duration.toMillis(duration)
  if (!Number.isFinite(millis) || millis < 0) {
    throw new RangeError(`SimbaTest: a latency must be finite and not negative, got ${Duration.format(duration)}`)
  }
  return Math.ceil(millis)
}

interface Held {
  readonly open: Deferred.Deferred<void>
  readonly delivered: Deferred.Deferred<void>
}

/**
 * Wraps any backend with a fault controller. Requests are carried by fibers in the current scope,
 * detached from the caller: a request that was sent still reaches the backend after the caller gave
 * up (timed out), as on a real network. Close the scope to stop them.
 */
export const faulty = (underlying: LeaseBackendService): Effect.Effect<FaultyBackend, never, Scope.Scope> =>
  Effect.gen(function*() {
    // Requests travel in fibers of a child scope, opened now: when the enclosing scope closes, the
    // clients built after this link close first (their last calls still get through), then the link.
    const scope = yield* Effect.flatMap(Effect.scope, (parent) => Scope.fork(parent, ExecutionStrategy.sequential))
    const rules = yield* Ref.make(healthy)
    const held = yield* Ref.make<ReadonlyArray<Held>>([])
    const log = yield* Ref.make<ReadonlyArray<CallRecord>>([])
    const opened = yield* Ref.make<ReadonlyArray<string>>([])
    const injected = yield* PubSub.unbounded<Hint>()

    const send = <A>(
      operation: Operation,
      sessionId: string | undefined,
      name: string | undefined,
      call: Effect.Effect<A, BackendError>
    ): Effect.Effect<A, BackendError> =>
      Effect.gen(function*() {
        const at = yield* Clock.currentTimeMillis
        const r = yield* Ref.get(rules)
        const paused = matches(r.paused, operation)
        const slowed = r.slow.latency > 0 && matches(r.slow.only, operation)
        const fault = r.partitioned
          ? "partitioned" as const
          : matches(r.failing, operation)
          ? "failed" as const
          : paused
          ? "paused" as const
          : slowed
          ? "slowed" as const
          : undefined
        yield* Ref.update(log, (calls) => [...calls, { operation, sessionId, name, at, fault }])
        if (fault === "partitioned") return yield* Effect.never
        if (fault === "failed") {
          return yield* new BackendError({ backend: underlying.backend, operation, cause: "SimbaTest: injected failure" })
        }
        const gate: Held | undefined = paused
          ? { open: yield* Deferred.make<void>(), delivered: yield* Deferred.make<void>() }
          : undefined
        if (gate !== undefined) yield* Ref.update(held, (list) => [...list, gate])
        const reply = yield* Deferred.make<A, BackendError>()
        const requestDelay = slowed && r.slow.on === "request" ? r.slow.latency : 0
        const replyDelay = slowed && r.slow.on === "reply" ? r.slow.latency : 0
        const deliver = Effect.gen(function*() {
          if (gate !== undefined) yield* Deferred.await(gate.open)
          if (requestDelay > 0) {
            // On the wire: `resume` need not wait for it (it waits for the clock).
            if (gate !== undefined) yield* Deferred.succeed(gate.delivered, undefined)
            yield* Effect.sleep(Duration.millis(requestDelay))
          }
          if ((yield* Ref.get(rules)).partitioned) return // the request is lost
          const exit = yield* Effect.exit(call)
          if (gate !== undefined) yield* Deferred.succeed(gate.delivered, undefined)
          const now = yield* Ref.get(rules)
          if (now.partitioned || matches(now.dropping, operation)) return // the reply is lost
          if (replyDelay > 0) yield* Effect.sleep(Duration.millis(replyDelay))
          if ((yield* Ref.get(rules)).partitioned) return
          yield* Deferred.done(reply, exit)
        }).pipe(
          // A held request that is lost still counts as handled for `resume`.
          Effect.ensuring(gate === undefined ? Effect.void : Deferred.succeed(gate.delivered, undefined))
        )
        yield* Effect.forkIn(deliver, scope)
        return yield* Deferred.await(reply)
      })

    const backend: LeaseBackendService = {
      backend: underlying.backend,
      openSession: (ttl) =>
        send(
          "openSession",
          undefined,
          undefined,
          Effect.tap(underlying.openSession(ttl), (session) => Ref.update(opened, (ids) => [...ids, session.sessionId]))
        ),
      keepAlive: (sessionId, ttl, known) =>
        send("keepAlive", sessionId, undefined, underlying.keepAlive(sessionId, ttl, known)),
      closeSession: (sessionId) => send("closeSession", sessionId, undefined, underlying.closeSession(sessionId)),
      acquire: (sessionId, name) => send("acquire", sessionId, name, underlying.acquire(sessionId, name)),
      release: (sessionId, name, token) => send("release", sessionId, name, underlying.release(sessionId, name, token)),
      withdraw: (sessionId, name) => send("withdraw", sessionId, name, underlying.withdraw(sessionId, name)),
      join: (sessionId, group) => send("join", sessionId, group, underlying.join(sessionId, group)),
      leave: (sessionId, group) => send("leave", sessionId, group, underlying.leave(sessionId, group)),
      members: (group) => send("members", undefined, group, underlying.members(group)),
      hints: Stream.merge(
        underlying.hints.pipe(Stream.filterEffect(() => Effect.map(Ref.get(rules), (r) => !r.partitioned))),
        Stream.fromPubSub(injected)
      )
    }

    /** Opens the held requests one by one, in order, each after the previous one was delivered (or lost). */
    const release = Effect.gen(function*() {
      const list = yield* Ref.getAndSet(held, [])
      for (const gate of list) {
        yield* Deferred.succeed(gate.open, undefined)
        yield* Deferred.await(gate.delivered)
      }
    })

    const faults: Faults = {
      pause: (options) => Ref.update(rules, (r) => ({ ...r, paused: selector(options) })),
      resume: Effect.zipRight(Ref.update(rules, (r) => ({ ...r, paused: "none" as const })), release),
      slow: (latency, options) =>
        Effect.suspend(() => {
          const millis = wholeMillis(latency)
          return Ref.update(rules, (r) => ({
            ...r,
            slow: { latency: millis, on: options?.on ?? "reply", only: millis > 0 ? selector(options) : "none" }
          }))
        }),
      fail: (options) => Ref.update(rules, (r) => ({ ...r, failing: selector(options) })),
      drop: (options) => Ref.update(rules, (r) => ({ ...r, dropping: selector(options) })),
      partition: Ref.update(rules, (r) => ({ ...r, partitioned: true })),
      heal: Effect.zipRight(Ref.set(rules, healthy), release),
      expireSession: Effect.flatMap(
        Ref.get(opened),
        (ids) => Effect.forEach(ids, (id) => Effect.ignore(underlying.closeSession(id)), { discard: true })
      ),
      notify: (hint) => Effect.asVoid(PubSub.publish(injected, hint))
    }

    return { backend, faults, calls: Ref.get(log), sessions: Ref.get(opened) }
  })

/** A Simba client on a faulty link to the network. */
export interface TestClient {
  readonly client: SimbaClient
  readonly faults: Faults
  /** Every backend call this client made, in order. */
  readonly calls: Effect.Effect<ReadonlyArray<CallRecord>>
  /** Every session this client opened, in order (the last one is current, unless it is being replaced). */
  readonly sessions: Effect.Effect<ReadonlyArray<string>>
}

/**
 * Builds a client on `net` through its own faulty link, living in the current scope. When the scope
 * closes, the link is healed first, then the client closes its session.
 */
export const makeClient = (
  net: Network,
  config?: SimbaConfigInput
): Effect.Effect<TestClient, SimbaConfigError, Scope.Scope> =>
  Effect.gen(function*() {
    const link = yield* faulty(net.backend)
    const client = yield* makeSimbaClient(config).pipe(Effect.provideService(LeaseBackend, link.backend))
    // Finalizers run in reverse: heal before the client closes, so closing never waits on a fault.
    yield* Effect.addFinalizer(() => link.faults.heal)
    return { client, faults: link.faults, calls: link.calls, sessions: link.sessions }
  })

/** `count` clients on `net`, all with `config`. */
export const makeClients = (
  net: Network,
  count: number,
  config?: SimbaConfigInput
): Effect.Effect<Array<TestClient>, SimbaConfigError, Scope.Scope> =>
  Effect.all(Arr.makeBy(count, () => makeClient(net, config)))

// ---------------------------------------------------------------------------------------------------
// Time
// ---------------------------------------------------------------------------------------------------

/**
 * Lets a few event-loop turns pass, so fibers woken by the clock finish what they were doing (not a
 * lease decision: virtual time does not move here).
 */
const settle: Effect.Effect<void> = Effect.async<void>((resume) => {
  const turn = setImmediate(() => resume(Effect.void))
  return Effect.sync(() => clearImmediate(turn))
}).pipe(Effect.repeatN(2))

/**
 * Moves `TestClock` forward by `duration` in steps of `step` (default 250 ms), letting the fibers run
 * between steps and after the last one, so chains of timers and backend calls (renewal, reply, next
 * renewal) happen at the right virtual instants and have finished when it returns. Whole milliseconds.
 */
export const advance = (
  duration: Duration.DurationInput,
  options?: { readonly step?: Duration.DurationInput | undefined }
): Effect.Effect<void> =>
  Effect.gen(function*() {
    const step = Math.max(1, Math.floor(Duration.toMillis(options?.step ?? Duration.millis(250))))
    let left = Math.ceil(Duration.toMillis(duration))
    while (left > 0) {
      const now = Math.min(step, left)
      yield* TestClock.adjust(Duration.millis(now))
      left -= now
    }
    yield* settle
  })

// ---------------------------------------------------------------------------------------------------
// Fenced store
// ---------------------------------------------------------------------------------------------------

/** A write rejected by a `FencedStore`: its token is below one the store has already accepted. */
export class StaleTokenError extends Data.TaggedError("StaleTokenError")<{
  readonly token: bigint
  readonly highest: bigint
}> {
  override get message() {
    return `stale fencing token ${this.token}: the store has seen ${this.highest}`
  }
}

/** One write a `FencedStore` received. */
export interface FencedWrite<A> {
  readonly token: bigint
  readonly value: A
  readonly writer: string | undefined
  readonly accepted: boolean
  /** The highest token the store had accepted before this write. */
  readonly highestBefore: bigint
  /** When, in `Clock` milliseconds. */
  readonly at: number
}

/** A token, or anything carrying one (a `Term`). */
export type Fence = bigint | { readonly token: bigint }

/**
 * A reference storage service guarded by fencing tokens, as a database or object store would keep
 * it: a write is accepted only with a token at least as high as the highest it has accepted.
 */
export interface FencedStore<A> {
  /** Writes `value` if the token is not stale; answers whether it was accepted. */
  readonly write: (fence: Fence, value: A, writer?: string) => Effect.Effect<boolean>
  /** Like `write`, failing with `StaleTokenError` when rejected. */
  readonly writeOrFail: (fence: Fence, value: A, writer?: string) => Effect.Effect<void, StaleTokenError>
  /** The last accepted value. */
  readonly value: Effect.Effect<Option.Option<A>>
  /** The highest token accepted so far (0 before any write). */
  readonly highest: Effect.Effect<bigint>
  /** Every write, in order. */
  readonly writes: Effect.Effect<ReadonlyArray<FencedWrite<A>>>
  readonly accepted: Effect.Effect<ReadonlyArray<FencedWrite<A>>>
  readonly rejected: Effect.Effect<ReadonlyArray<FencedWrite<A>>>
}

const tokenOf = (fence: Fence): bigint => typeof fence === "bigint" ? fence : fence.token

const makeFencedStore = <A>(): Effect.Effect<FencedStore<A>> =>
  Effect.gen(function*() {
    const state = yield* Ref.make<{
      readonly highest: bigint
      readonly value: Option.Option<A>
      readonly writes: ReadonlyArray<FencedWrite<A>>
    }>({ highest: 0n, value: Option.none(), writes: [] })
    const write = (fence: Fence, value: A, writer?: string): Effect.Effect<FencedWrite<A>> =>
      Effect.flatMap(Clock.currentTimeMillis, (at) =>
        Ref.modify(state, (s) => {
          const token = tokenOf(fence)
          const accepted = token >= s.highest
          const record: FencedWrite<A> = { token, value, writer, accepted, highestBefore: s.highest, at }
          return [record, {
            highest: accepted ? token : s.highest,
            value: accepted ? Option.some(value) : s.value,
            writes: [...s.writes, record]
          }]
        }))
    const writes = Effect.map(Ref.get(state), (s) => s.writes)
    return {
      write: (fence, value, writer) => Effect.map(write(fence, value, writer), (record) => record.accepted),
      writeOrFail: (fence, value, writer) =>
        Effect.flatMap(write(fence, value, writer), (record) =>
          record.accepted
            ? Effect.void
            : Effect.fail(new StaleTokenError({ token: record.token, highest: record.highestBefore }))),
      value: Effect.map(Ref.get(state), (s) => s.value),
      highest: Effect.map(Ref.get(state), (s) => s.highest),
      writes,
      accepted: Effect.map(writes, Arr.filter((w) => w.accepted)),
      rejected: Effect.map(writes, Arr.filter((w) => !w.accepted))
    }
  })

/** `SimbaTest.FencedStore.make<A>()` makes an empty store. */
export const FencedStore = { make: makeFencedStore }

// ---------------------------------------------------------------------------------------------------
// Leadership checker
// ---------------------------------------------------------------------------------------------------

/** One period during which `client` acted as leader of `name` under the term with `token`. */
export interface LeaderInterval {
  readonly client: string
  readonly name: string
  readonly token: bigint
  /** `Clock` milliseconds. */
  readonly start: number
  /** `Clock` milliseconds; `undefined` while it lasts. */
  readonly end: number | undefined
}

/** A breach of single leadership found by `checkNoOverlap`. */
export type Violation = Data.TaggedEnum<{
  /** Two different terms of one name were both leading at some instant. */
  Overlap: { readonly name: string; readonly first: LeaderInterval; readonly second: LeaderInterval }
  /** A later term of a name carried a token not above an earlier one's. */
  TokenNotIncreasing: { readonly name: string; readonly first: LeaderInterval; readonly second: LeaderInterval }
}>
export const Violation = Data.taggedEnum<Violation>()

const describeInterval = (i: LeaderInterval): string =>
  `${i.client} token ${i.token} [${i.start} ms, ${i.end === undefined ? "…" : `${i.end} ms`})`

/** A readable line per violation. */
export const formatViolation = (violation: Violation): string =>
  violation._tag === "Overlap"
    ? `${violation.name}: ${describeInterval(violation.first)} overlaps ${describeInterval(violation.second)}`
    : `${violation.name}: ${describeInterval(violation.second)} follows ${
      describeInterval(violation.first)
    } without a higher token`

/** Single leadership was breached. */
export class LeadershipViolation extends Data.TaggedError("LeadershipViolation")<{
  readonly violations: ReadonlyArray<Violation>
}> {
  override get message() {
    return `leadership violated:\n${this.violations.map(formatViolation).join("\n")}`
  }
}

/**
 * Checks intervals of leadership (yours, or a `recorder`'s): for each name, no two different terms
 * overlap in time (touching is fine: one may start at the instant the other ended), and in order of
 * start each new term carries a higher token. Intervals with the same name and token are one term
 * (a scheduled task runs many times per term). Returns the violations, empty when all is well.
 */
export const checkNoOverlap = (intervals: Iterable<LeaderInterval>): ReadonlyArray<Violation> => {
  const byName = new Map<string, Array<LeaderInterval>>()
  for (const interval of intervals) {
    const list = byName.get(interval.name)
    if (list === undefined) byName.set(interval.name, [interval])
    else list.push(interval)
  }
  const violations: Array<Violation> = []
  for (const [name, list] of byName) {
    const sorted = [...list].sort((a, b) => a.start - b.start || (a.token < b.token ? -1 : a.token > b.token ? 1 : 0))
    for (let i = 0; i < sorted.length; i++) {
      const first = sorted[i]!
      for (let j = i + 1; j < sorted.length; j++) {
        const second = sorted[j]!
        const sameTerm = first.token === second.token && first.client === second.client
        if (sameTerm) continue
        if (second.token <= first.token) violations.push(Violation.TokenNotIncreasing({ name, first, second }))
        if (first.end === undefined || first.end > second.start) {
          violations.push(Violation.Overlap({ name, first, second }))
        }
      }
    }
  }
  return violations
}

/** Records leadership per client, from terms, for `checkNoOverlap`. */
export interface LeaderRecorder {
  /**
   * Wraps leader-only work: each run is recorded from when it starts until it exits or its term is
   * revoked, whichever comes first. `client.runWhileLeader(name, recorder.track("a", work))`.
   */
  readonly track: <A, E, R>(
    client: string,
    work: (term: Term) => Effect.Effect<A, E, R>
  ) => (term: Term) => Effect.Effect<A, E, R>
  /**
   * Records every term a client wins, from its `Elected` event to its `Revoked` event, for as long as
   * the scope lasts. Call it before the client starts competing.
   */
  readonly watch: (client: string, simba: SimbaClient) => Effect.Effect<void, never, Scope.Scope>
  readonly intervals: Effect.Effect<ReadonlyArray<LeaderInterval>>
  /** The intervals of `name` still open (its current leader, if all is well). */
  readonly current: (name: string) => Effect.Effect<ReadonlyArray<LeaderInterval>>
  /** `checkNoOverlap` over everything recorded. */
  readonly violations: Effect.Effect<ReadonlyArray<Violation>>
  /** Fails with `LeadershipViolation` if `violations` is not empty. */
  readonly assertNoOverlap: Effect.Effect<void, LeadershipViolation>
}

/** A fresh recorder. Times come from `Clock`, so all clients must share one clock (one process, or `TestClock`). */
export const recorder: Effect.Effect<LeaderRecorder> = Effect.gen(function*() {
  const state = yield* Ref.make<ReadonlyArray<LeaderInterval>>([])
  const open = (client: string, name: string, token: bigint) =>
    Effect.flatMap(Clock.currentTimeMillis, (start) =>
      Ref.modify(state, (list) => [list.length, [...list, { client, name, token, start, end: undefined }]]))
  const close = (index: number) =>
    Effect.flatMap(Clock.currentTimeMillis, (end) =>
      Ref.update(state, (list) =>
        list.map((interval, i) => i === index && interval.end === undefined ? { ...interval, end } : interval)))
  const intervals = Ref.get(state)
  const violations = Effect.map(intervals, checkNoOverlap)

  const track = <A, E, R>(client: string, work: (term: Term) => Effect.Effect<A, E, R>) => (term: Term) =>
    Effect.uninterruptibleMask((restore) =>
      Effect.gen(function*() {
        const index = yield* open(client, term.name, term.token)
        const watcher = yield* Effect.forkDaemon(Effect.interruptible(Effect.flatMap(term.revoked, () => close(index))))
        return yield* restore(work(term)).pipe(
          Effect.ensuring(Effect.zipRight(close(index), Fiber.interrupt(watcher)))
        )
      })
    )

  const watch = (client: string, simba: SimbaClient): Effect.Effect<void, never, Scope.Scope> =>
    Effect.gen(function*() {
      const terms = new Map<string, number>()
      const onEvent = (event: SimbaEvent): Effect.Effect<void> => {
        switch (event._tag) {
          case "Elected":
            return Effect.map(open(client, event.name, event.token), (index) => {
              terms.set(`${event.name}\u0000${event.token}`, index)
            })
          case "Revoked": {
            const key = `${event.name}\u0000${event.token}`
            const index = terms.get(key)
            terms.delete(key)
            return index === undefined ? Effect.void : close(index)
          }
          default:
            return Effect.void
        }
      }
      yield* Effect.forkScoped(Stream.runForEach(simba.events, onEvent))
      // Let the subscriber fiber subscribe before the caller goes on.
      yield* Effect.repeatN(Effect.yieldNow(), 4)
    })

  return {
    track,
    watch,
    intervals,
    current: (name) => Effect.map(intervals, Arr.filter((i) => i.name === name && i.end === undefined)),
    violations,
    assertNoOverlap: Effect.flatMap(violations, (found) =>
      found.length === 0 ? Effect.void : Effect.fail(new LeadershipViolation({ violations: found })))
  }
})
