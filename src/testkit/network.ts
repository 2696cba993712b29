/**
 * The faulty network of `SimbaTest`: a shared store (`Network`), a fault controller that wraps any
 * backend (`faulty`), and test clients each on their own faulty link (`makeClient`). Requests travel
 * in fibers detached from the caller, so a request already sent still reaches the store after its
 * caller gave up, as on a real network.
 */
import * as Arr from "effect/Array"
import * as Clock from "effect/Clock"
import * as Deferred from "effect/Deferred"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as ExecutionStrategy from "effect/ExecutionStrategy"
import * as PubSub from "effect/PubSub"
import * as Ref from "effect/Ref"
import * as Scope from "effect/Scope"
import * as Stream from "effect/Stream"
import type { SimbaConfigError } from "../Errors.js"
import {
  BackendError,
  type Hint,
  LeaseBackend,
  type LeaseBackendService
} from "../LeaseBackend.js"
import * as MemoryBackend from "../layers/Memory.js"
import { make as makeSimbaClient, type SimbaClient } from "../Simba.js"
import type { SimbaConfigInput } from "../SimbaConfig.js"

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
      holds: underlying.holds,
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
      acquire: (sessionId, name, reserve) =>
        send("acquire", sessionId, name, underlying.acquire(sessionId, name, reserve)),
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
