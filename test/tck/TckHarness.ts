/**
 * Shared machinery of the TCK suites (`LeaseBackendSpec`, `FencingSpec`): options, the test runner that
 * provides the backend layer, time (TestClock or real sleeps), unique names and small helpers that
 * assert the shape of replies. Backend-agnostic: the same suites run on the memory backend under
 * `TestClock` and on real servers with real time.
 */
import { expect, it } from "@effect/vitest"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import type * as Layer from "effect/Layer"
import * as Schedule from "effect/Schedule"
import type * as Scope from "effect/Scope"
import * as Stream from "effect/Stream"
import * as SubscriptionRef from "effect/SubscriptionRef"
import * as TestClock from "effect/TestClock"
import * as TestServices from "effect/TestServices"
import { randomBytes } from "node:crypto"
import {
  type AcquireReply,
  type HeldLease,
  type Hint,
  type KeepAliveReply,
  LeaseBackend,
  type LeaseBackendService
} from "../../src/LeaseBackend.js"
import * as SimbaConfig from "../../src/SimbaConfig.js"
import type { SimbaConfigInput } from "../../src/SimbaConfig.js"
import * as SimbaTest from "../../src/SimbaTest.js"

/** How a backend is tested. */
export interface TckOptions {
  /**
   * `true`: time is `TestClock` (in-process backends that read Effect's `Clock`), moved with
   * `TestClock.adjust`. `false`: real time and real sleeps (servers keep their own clock).
   */
  readonly virtualTime: boolean
  /** The session ttl the tests ask for. With real time keep it short: 1–2 s. */
  readonly ttl: Duration.DurationInput
  /** The backend pushes hints; the hint tests are registered only then. Default `false`. */
  readonly hints?: boolean | undefined
  /**
   * The backend hints a session once when it starts hearing of a lease the session waits for, a plain
   * `Released` (Redis: the lease's channel is subscribed after the refusal, so the candidate asks again
   * in case a release came before). Default `false`.
   */
  readonly hintOnWait?: boolean | undefined
  /** Session ids are random 128-bit, 32 lowercase hex (memory, Redis, SQL). Default `true`. */
  readonly randomSessionIds?: boolean | undefined
  /**
   * A renewal that names the current lease-set version gets no list back (SPEC section 7). `false`
   * for a backend that lists on every renewal: the renewal cases then check that
   * every list is complete instead. Default `true`.
   */
  readonly versionedRenewals?: boolean | undefined
  /**
   * A release grants the lease straight to the first queued waiter (Redis on one node): the
   * hand-off cases are registered only then. Default `false`.
   */
  readonly handOffGrants?: boolean | undefined
  /**
   * The store grants holds (semaphores and read locks: `LeaseBackendService.holds`): their cases are
   * registered; otherwise one case checks that they fail with `NotSupportedError`. Default `false`.
   */
  readonly holds?: boolean | undefined
  /**
   * The `remaining` a fresh session or a renewal reports for a request of `ttl`, where the backend
   * grants less (a capped or ZooKeeper-style backend). Default: `ttl`.
   */
  readonly granted?: Duration.DurationInput | undefined
  /** How far a reported `remaining` may be off (round trips, clock ticks). Default 0 virtual, ttl/5 real. */
  readonly tolerance?: Duration.DurationInput | undefined
  /** How long past `ttl` of silence a session may still look alive. Default 0 virtual, max(250 ms, ttl/4) real. */
  readonly expiryGrace?: Duration.DurationInput | undefined
  /** How long to wait for a pushed hint (real time). Default 5 s. */
  readonly hintTimeout?: Duration.DurationInput | undefined
  /**
   * Timing of the Simba clients in the client-level cases. Default: `{ leaseDuration: "3 seconds" }`
   * with virtual time, `{ leaseDuration: ttl }` with real time (keep it short there: 1.5–3 s).
   */
  readonly client?: SimbaConfigInput | undefined
  /** How long the multi-contend case runs. Default 10 lease durations virtual, 8 real. */
  readonly contendFor?: Duration.DurationInput | undefined
}

/** What a test body may require: the backend under test and a scope closed when the test ends. */
export type TckEffect<A = void> = Effect.Effect<A, unknown, LeaseBackend | Scope.Scope>

/** The harness the suites are written against. */
export interface Tck {
  readonly virtualTime: boolean
  readonly hints: boolean
  readonly hintOnWait: boolean
  readonly randomSessionIds: boolean
  readonly versionedRenewals: boolean
  readonly handOffGrants: boolean
  readonly holds: boolean
  readonly ttl: Duration.Duration
  readonly granted: Duration.Duration
  readonly tolerance: Duration.Duration
  /** How long a session must stay silent before it surely expired: `ttl + expiryGrace`. */
  readonly silence: Duration.Duration
  readonly hintTimeout: Duration.Duration
  /** Registers one test: fresh backend from the layer, scoped, on `TestClock` or real time. */
  readonly test: (name: string, body: TckEffect, timeout?: number) => void
  /** Lets `duration` pass: `TestClock.adjust` (rounded up to whole milliseconds) or a real sleep. */
  readonly sleep: (duration: Duration.DurationInput) => Effect.Effect<void>
  /** The validated timing of the clients in the client-level cases. */
  readonly client: SimbaConfig.SimbaConfig
  /** How long the multi-contend case runs. */
  readonly contendFor: Duration.Duration
  /**
   * Lets `duration` pass with clients running: `SimbaTest.advance` (TestClock in small steps, so
   * every chain of timers and calls runs at its instant) or a real sleep.
   */
  readonly advance: (duration: Duration.DurationInput) => Effect.Effect<void>
}

export const make = (layer: Layer.Layer<LeaseBackend, unknown>, options: TckOptions): Tck => {
  const ttl = Duration.decode(options.ttl)
  const granted = options.granted === undefined ? ttl : Duration.decode(options.granted)
  const tolerance = options.tolerance !== undefined
    ? Duration.decode(options.tolerance)
    : options.virtualTime
    ? Duration.zero
    : Duration.unsafeDivide(ttl, 5)
  const expiryGrace = options.expiryGrace !== undefined
    ? Duration.decode(options.expiryGrace)
    : options.virtualTime
    ? Duration.zero
    : Duration.max(Duration.millis(250), Duration.unsafeDivide(ttl, 4))
  const silence = Duration.sum(ttl, expiryGrace)
  const client = Effect.runSync(
    SimbaConfig.make(options.client ?? (options.virtualTime ? { leaseDuration: "3 seconds" } : { leaseDuration: ttl }))
  )
  const contendFor = options.contendFor !== undefined
    ? Duration.decode(options.contendFor)
    : Duration.millis(client.leaseDuration * (options.virtualTime ? 10 : 8))
  // Real-time tests wait a few ttls at most; leave room for slow servers.
  const defaultTimeout = options.virtualTime ? 20_000 : 30_000 + 6 * Duration.toMillis(silence)
  return {
    virtualTime: options.virtualTime,
    hints: options.hints ?? false,
    hintOnWait: options.hintOnWait ?? false,
    randomSessionIds: options.randomSessionIds ?? true,
    versionedRenewals: options.versionedRenewals ?? true,
    handOffGrants: options.handOffGrants ?? false,
    holds: options.holds ?? false,
    ttl,
    granted,
    tolerance,
    silence,
    hintTimeout: Duration.decode(options.hintTimeout ?? "5 seconds"),
    test: (name, body, timeout) => {
      const run = () => Effect.provide(body, layer)
      if (options.virtualTime) it.scoped(name, run, timeout ?? defaultTimeout)
      else it.scopedLive(name, run, timeout ?? defaultTimeout)
    },
    // TestClock moves by whole milliseconds only: round up, so "after d" is never "just before d".
    sleep: (duration) =>
      options.virtualTime
        ? TestClock.adjust(Duration.millis(Math.ceil(Duration.toMillis(duration))))
        : Effect.sleep(duration),
    client,
    contendFor,
    advance: (duration) => options.virtualTime ? SimbaTest.advance(duration) : Effect.sleep(duration)
  }
}

/** The backend under test. */
export const backend: Effect.Effect<LeaseBackendService, never, LeaseBackend> = LeaseBackend

/**
 * A lease or group name no earlier run can have used (`tck.<24 hex>.<label>`), so suites pass on a
 * server holding leftovers. From the OS CSPRNG, not `Random`: a seeded `Random` would repeat across runs.
 */
export const uniqueName = (label: string): Effect.Effect<string> =>
  Effect.sync(() => `tck.${randomBytes(12).toString("hex")}.${label}`)

/** Unique names sharing one random prefix. */
export const uniqueNames = <const L extends ReadonlyArray<string>>(
  ...labels: L
): Effect.Effect<{ readonly [K in keyof L]: string }> =>
  Effect.sync(() => {
    const prefix = `tck.${randomBytes(12).toString("hex")}`
    return labels.map((label) => `${prefix}.${label}`) as unknown as { readonly [K in keyof L]: string }
  })

/** A random 32-hex session id no backend issued (with overwhelming probability). */
export const unknownSessionId: Effect.Effect<string> = Effect.sync(() => randomBytes(16).toString("hex"))

/** Opens a session for `tck.ttl` and returns its id. */
export const open = (tck: Tck): Effect.Effect<string, unknown, LeaseBackend> =>
  Effect.flatMap(backend, (b) => b.openSession(tck.ttl)).pipe(Effect.map((opened) => opened.sessionId))

/** `actual` is within `tck.tolerance` of `expected`. */
export const expectAbout = (tck: Tck, actual: Duration.Duration, expected: Duration.Duration): void => {
  const slack = Duration.toMillis(tck.tolerance)
  expect(Duration.toMillis(actual)).toBeGreaterThanOrEqual(Duration.toMillis(expected) - slack)
  expect(Duration.toMillis(actual)).toBeLessThanOrEqual(Duration.toMillis(expected) + slack)
}

/** Asserts the reply is `Granted` and returns its token. */
export const expectGranted = (reply: AcquireReply): bigint => {
  if (reply._tag !== "Granted") expect.fail(`expected Granted, got ${reply._tag}`)
  return reply.token
}

/** Asserts the reply is `HeldBy` and returns it. */
export const expectHeldBy = (reply: AcquireReply): Extract<AcquireReply, { _tag: "HeldBy" }> => {
  if (reply._tag !== "HeldBy") expect.fail(`expected HeldBy, got ${reply._tag}`)
  return reply
}

/** Asserts the reply is `Live` and returns it. */
export const expectLive = (reply: KeepAliveReply): Extract<KeepAliveReply, { _tag: "Live" }> => {
  if (reply._tag !== "Live") expect.fail(`expected Live, got ${reply._tag}`)
  return reply
}

/** The lease list of a renewal reply, asserting it has one (a renewal that named no known version). */
export const listed = (live: Extract<KeepAliveReply, { _tag: "Live" }>): ReadonlyArray<HeldLease> => {
  if (live.leases === undefined) expect.fail(`expected a lease list, got "unchanged since ${live.version}"`)
  return live.leases
}

/** Acquires `name` for `sessionId`, asserting it is granted; returns the token. */
export const acquireGranted = (sessionId: string, name: string): Effect.Effect<bigint, unknown, LeaseBackend> =>
  Effect.flatMap(backend, (b) => b.acquire(sessionId, name)).pipe(Effect.map(expectGranted))

/** Renews `sessionId`, asserting it is live; returns the reply. */
export const renew = (
  tck: Tck,
  sessionId: string
): Effect.Effect<Extract<KeepAliveReply, { _tag: "Live" }>, unknown, LeaseBackend> =>
  Effect.flatMap(backend, (b) => b.keepAlive(sessionId, tck.ttl)).pipe(Effect.map(expectLive))

/** The leases `sessionId` holds according to a renewal, sorted by name. */
export const heldLeases = (tck: Tck, sessionId: string): Effect.Effect<Array<HeldLease>, unknown, LeaseBackend> =>
  Effect.map(renew(tck, sessionId), (live) => [...listed(live)].sort((a, b) => a.name.localeCompare(b.name)))

/**
 * Lets `duration` pass while renewing `sessionIds` often enough (every third of the shorter of ttl and
 * granted) that they stay live; each renewal must answer `Live`.
 */
export const keepAliveDuring = (
  tck: Tck,
  duration: Duration.DurationInput,
  sessionIds: ReadonlyArray<string>
): Effect.Effect<void, unknown, LeaseBackend> =>
  Effect.gen(function*() {
    // Whole milliseconds: TestClock cannot move by a fraction of one.
    const step = Math.max(1, Math.floor(Duration.toMillis(Duration.min(tck.ttl, tck.granted)) / 3))
    let left = Math.ceil(Duration.toMillis(duration))
    while (left > 0) {
      const now = Math.min(step, left)
      yield* tck.sleep(Duration.millis(now))
      left -= now
      yield* Effect.forEach(sessionIds, (sessionId) => renew(tck, sessionId), { discard: true })
    }
  })

/** Hints received since `watchHints` started, and a way to wait for some. */
export interface HintWatch {
  readonly seen: Effect.Effect<ReadonlyArray<Hint>>
  /** Waits (real time, at most `tck.hintTimeout`) until `count` received hints satisfy `predicate`. */
  readonly await: (predicate: (hint: Hint) => boolean, count?: number) => Effect.Effect<void, Error>
}

/** A hint that `name` was freed: a plain or targeted `Released`, or a hand-off's `Granted`. */
export const freedOf = (name: string) => (hint: Hint): boolean =>
  (hint._tag === "Released" || hint._tag === "Granted") && hint.name === name

/** The hint a `hintOnWait` backend gives when it starts hearing of `name` for a waiting session. */
export const waitHintOf = (name: string) => (hint: Hint): boolean =>
  hint._tag === "Released" && hint.name === name && hint.to === undefined

/**
 * `waiter` asks for `name`, held by another session, and is refused; returns once the backend heard
 * of the wait (with `hintOnWait`, after that hint), with the number of hints about `name` freed so
 * far: the next one is the release's.
 */
export const waitForLease = (
  tck: Tck,
  watch: HintWatch,
  waiter: string,
  name: string
): Effect.Effect<number, unknown, LeaseBackend> =>
  Effect.gen(function*() {
    const b = yield* backend
    const reply = yield* b.acquire(waiter, name)
    expect(reply._tag).toBe("HeldBy")
    if (tck.hintOnWait) yield* watch.await(waitHintOf(name))
    return (yield* watch.seen).filter(freedOf(name)).length
  })

/**
 * Subscribes to the backend's hints for the rest of the scope, and returns once the subscription is
 * proven live: a session holds a warm-up lease, another waits for it, the first releases it, until a
 * hint about it comes back (a pub/sub subscription may take a round trip to become effective; a
 * backend may hear of a lease only while a session waits for it).
 */
export const watchHints = (tck: Tck): Effect.Effect<HintWatch, unknown, LeaseBackend | Scope.Scope> =>
  Effect.gen(function*() {
    const b = yield* backend
    const received = yield* SubscriptionRef.make<ReadonlyArray<Hint>>([])
    yield* b.hints.pipe(
      Stream.runForEach((hint) => SubscriptionRef.update(received, (hints) => [...hints, hint])),
      Effect.forkScoped
    )
    const waitFor = (predicate: (hint: Hint) => boolean, count: number, timeout: Duration.Duration) =>
      received.changes.pipe(
        Stream.filter((hints) => hints.filter(predicate).length >= count),
        Stream.take(1),
        Stream.runDrain,
        Effect.timeoutFail({
          duration: timeout,
          onTimeout: () => new Error(`${count} matching hint(s) not received within ${Duration.format(timeout)}`)
        }),
        // Waiting is measured on the real clock even under TestClock: hints travel between fibers.
        TestServices.provideLive
      )
    const holder = yield* open(tck)
    const waiter = yield* open(tck)
    yield* Effect.gen(function*() {
      const warmUp = yield* uniqueName("warm-up")
      const token = yield* acquireGranted(holder, warmUp)
      expect((yield* b.acquire(waiter, warmUp))._tag).toBe("HeldBy")
      yield* b.release(holder, warmUp, token)
      yield* waitFor(freedOf(warmUp), 1, Duration.millis(200))
    }).pipe(
      Effect.retry(Schedule.recurs(Math.max(1, Math.ceil(Duration.toMillis(tck.hintTimeout) / 200))))
    )
    yield* b.closeSession(holder)
    yield* b.closeSession(waiter)
    return {
      seen: SubscriptionRef.get(received),
      await: (predicate, count = 1) => waitFor(predicate, count, tck.hintTimeout)
    }
  })
