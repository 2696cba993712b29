/**
 * The shell: one fiber per client that takes events from a queue, runs the pure `Engine.step` with
 * `now` from Effect's `Clock`, and performs the effects it returns (backend calls in their own fibers
 * with a timeout of one renewal period, timers as sleeping fibers, terms' deadlines, work fibers,
 * events to a `PubSub`, completions to `Deferred`s). Only the loop fiber touches the engine state.
 */
import * as Cause from "effect/Cause"
import * as Deferred from "effect/Deferred"
import * as Duration from "effect/Duration"
import * as ExecutionStrategy from "effect/ExecutionStrategy"
import * as Effect from "effect/Effect"
import * as Exit from "effect/Exit"
import * as Fiber from "effect/Fiber"
import * as Metric from "effect/Metric"
import * as MetricBoundaries from "effect/MetricBoundaries"
import * as MetricKey from "effect/MetricKey"
import type * as MetricKeyType from "effect/MetricKeyType"
import * as MetricLabel from "effect/MetricLabel"
import type * as MetricState from "effect/MetricState"
import * as Option from "effect/Option"
import * as PubSub from "effect/PubSub"
import * as Queue from "effect/Queue"
import * as Random from "effect/Random"
import * as Ref from "effect/Ref"
import type * as Schedule from "effect/Schedule"
import * as Scope from "effect/Scope"
import * as Stream from "effect/Stream"
import * as SubscriptionRef from "effect/SubscriptionRef"
import * as Engine from "../Engine.js"
import {
  ElectionAlreadyStartedError,
  LockLostError,
  LockTimeoutError,
  SimbaClosedError,
  SimbaConfigError
} from "../Errors.js"
import { BackendError, LeaseBackend, type LeaseBackendService } from "../LeaseBackend.js"
import * as LeaseName from "../LeaseName.js"
import * as SimbaConfig from "../SimbaConfig.js"
import { format, type SimbaEvent } from "../SimbaEvent.js"
import type { Election, ElectionError, ElectionOptions, LockError, LockOptions, SimbaClient, SimbaSnapshot } from "../Simba.js"
import * as Term from "../Term.js"

// ---------------------------------------------------------------------------------------------------
// Metrics
// ---------------------------------------------------------------------------------------------------

// Every metric is built from a key that already carries its tags: `Metric.tagged` would build (and
// hash) a new key on every update, a cost paid on every backend call.
const labelled = (labels: Record<string, string>) =>
  Object.entries(labels).map(([key, value]) => MetricLabel.make(key, value))

const counter = (name: string, description: string, labels: Record<string, string>) =>
  Metric.fromMetricKey(
    MetricKey.taggedWithLabels(MetricKey.counter(name, { description, incremental: true }), labelled(labels))
  )

/** A latency histogram in milliseconds, with the buckets of `Metric.timer`. */
const timer = (name: string, description: string, labels: Record<string, string>) =>
  Metric.fromMetricKey(
    MetricKey.taggedWithLabels(
      MetricKey.histogram(name, MetricBoundaries.exponential({ start: 0.5, factor: 2, count: 35 }), description),
      labelled({ ...labels, time_unit: "milliseconds" })
    )
  ).pipe(Metric.mapInput(Duration.toMillis))

const termsWon = counter("simba_terms_total", "terms won", {})
const leaderGauge = Metric.gauge("simba_leader_terms", { description: "terms this client currently holds" })
const revocationsByReason = Object.fromEntries(
  Object.keys(Term.RevokeReason).map((reason) => [
    reason,
    counter("simba_revocations_total", "terms revoked, by reason", { reason })
  ])
) as Record<Term.RevokeReason, Metric.Metric.Counter<number>>

/** The per-call metrics of one backend operation, built once per operation. */
const callMetrics = (backend: string) => {
  const cache = new Map<string, {
    readonly success: Metric.Metric.Counter<number>
    readonly failure: Metric.Metric.Counter<number>
    readonly latency: Metric.Metric<MetricKeyType.MetricKeyType.Histogram, Duration.Duration, MetricState.MetricState.Histogram>
  }>()
  return (operation: string) => {
    let metrics = cache.get(operation)
    if (metrics === undefined) {
      const calls = (outcome: string) =>
        counter("simba_backend_calls_total", "backend calls by backend, operation and outcome", {
          backend,
          operation,
          outcome
        })
      metrics = {
        success: calls("success"),
        failure: calls("failure"),
        latency: timer("simba_backend_call_duration", "backend call latency by backend and operation", {
          backend,
          operation
        })
      }
      cache.set(operation, metrics)
    }
    return metrics
  }
}

/**
 * Asks `fiber` to stop without waiting for it, like `Fiber.interruptFork` but without forking a fiber
 * to do the asking (the shell does this on every revocation, timeout and re-armed timer).
 */
const interruptSignal = (fiber: Fiber.RuntimeFiber<unknown, unknown>): Effect.Effect<void> =>
  Effect.flatMap(Effect.fiberId, (id) => Effect.sync(() => fiber.unsafeInterruptAsFork(id)))

// ---------------------------------------------------------------------------------------------------
// Shell
// ---------------------------------------------------------------------------------------------------

/** What the shell does with the terms of one handle (an election, a lock or a partition group). */
interface Hooks {
  /** Returns the work to run for the term, if any. */
  readonly onElected: (term: Term.Term, partition: number | undefined) => Effect.Effect<Option.Option<Effect.Effect<unknown, unknown>>>
  readonly onRevoked: (term: Term.Term, reason: Term.RevokeReason) => Effect.Effect<void>
}

interface LiveTerm {
  readonly term: Term.Term
  readonly revoked: Deferred.Deferred<Term.RevokeReason>
  work: Fiber.RuntimeFiber<unknown, unknown> | undefined
  readonly handle: number
  readonly group: string | undefined
}

const toResponse = (
  backend: LeaseBackendService,
  request: Engine.Request
): Effect.Effect<Engine.Response, BackendError> => {
  switch (request._tag) {
    case "OpenSession":
      return Effect.map(backend.openSession(Duration.millis(request.ttl)), (opened) => ({
        _tag: "Opened" as const,
        sessionId: opened.sessionId,
        remaining: Duration.toMillis(opened.remaining)
      }))
    case "KeepAlive":
      return Effect.map(
        backend.keepAlive(request.sessionId, Duration.millis(request.ttl)),
        (reply): Engine.Response =>
          reply._tag === "Expired"
            ? { _tag: "Expired" }
            : { _tag: "Live", remaining: Duration.toMillis(reply.remaining), leases: reply.leases, groups: reply.groups }
      )
    case "CloseSession":
      return Effect.as(backend.closeSession(request.sessionId), { _tag: "Done" as const })
    case "Acquire":
      return Effect.map(backend.acquire(request.sessionId, request.name), (reply): Engine.Response => {
        switch (reply._tag) {
          case "Granted":
            return { _tag: "Granted", token: reply.token }
          case "HeldBy":
            return {
              _tag: "HeldBy",
              token: reply.token,
              remaining: reply.remaining === undefined ? undefined : Duration.toMillis(reply.remaining)
            }
          case "Expired":
            return { _tag: "Expired" }
        }
      })
    case "Release":
      return Effect.as(backend.release(request.sessionId, request.name, request.token), { _tag: "Done" as const })
    case "Join":
      return Effect.map(
        backend.join(request.sessionId, request.group),
        (reply): Engine.Response => reply === "Joined" ? { _tag: "Joined" } : { _tag: "Expired" }
      )
    case "Leave":
      return Effect.as(backend.leave(request.sessionId, request.group), { _tag: "Done" as const })
    case "Members":
      return Effect.map(backend.members(request.group), (members) => ({ _tag: "MemberList" as const, members }))
  }
}

const operationName = (request: Engine.Request): string =>
  request._tag.charAt(0).toLowerCase() + request._tag.slice(1)

/**
 * Builds one client on the `LeaseBackend` in context. The client lives in the current `Scope`;
 * closing the scope closes the session (with handover).
 */
export const make = (
  input?: SimbaConfig.SimbaConfigInput
): Effect.Effect<SimbaClient, SimbaConfigError, LeaseBackend | Scope.Scope> =>
  Effect.gen(function*() {
    const config = yield* SimbaConfig.make(input)
    const backend = yield* LeaseBackend
    // The client's fibers live in a child scope, closed only after the session was closed: closing
    // needs the loop, timers and backend calls.
    const scope = yield* Effect.flatMap(Effect.scope, (parent) => Scope.fork(parent, ExecutionStrategy.sequential))
    const parentScope = yield* Effect.scope
    const seed = yield* Random.nextIntBetween(0, 2 ** 31 - 1)
    const events = yield* Queue.unbounded<Engine.Event>()
    const pubsub = yield* PubSub.unbounded<SimbaEvent>()
    const state = yield* Ref.make(Engine.initial(config, seed))
    const shutdown = yield* Deferred.make<void>()

    // Registries. Hooks and completions are registered by API calls before their event is queued;
    // everything else is touched by the loop fiber only.
    const hooks = new Map<number, Hooks>()
    const groupHooks = new Map<string, Hooks>()
    const completions = new Map<number, Deferred.Deferred<Engine.Outcome>>()
    const timers = new Map<string, Fiber.RuntimeFiber<void>>()
    const deadlines = new Map<number, number>()
    const terms = new Map<number, LiveTerm>()
    let nextId = 1
    const metricsFor = callMetrics(backend.backend)

    const offer = (event: Engine.Event) => Queue.offer(events, event)

    /** Queues an event carrying a fresh completion and waits for the engine to complete it. */
    const request = (make: (completion: number) => Engine.Event): Effect.Effect<Engine.Outcome> =>
      Effect.gen(function*() {
        if (yield* Deferred.isDone(shutdown)) return { _tag: "Closed" } as const
        const completion = nextId++
        const deferred = yield* Deferred.make<Engine.Outcome>()
        completions.set(completion, deferred)
        yield* offer(make(completion))
        return yield* Deferred.await(deferred)
      })

    /**
     * After the client's scope closed nobody will complete anything: answer every waiter `Closed`.
     * The waiters are listed when it runs: an iterator made now would live as long as the client and
     * keep every table the map ever outgrew (V8 chains them for live iterators), a leak per call.
     */
    const shutDown = Effect.zipRight(
      Deferred.succeed(shutdown, undefined),
      Effect.suspend(() =>
        Effect.forEach(Array.from(completions.values()), (deferred) => Deferred.succeed(deferred, { _tag: "Closed" }), {
          discard: true
        })
      )
    )

    // Backend calls in flight, each with its deadline (one renewal period after it was sent). A single
    // sweeper fiber, sleeping until the earliest deadline, times them out: a timeout per call would
    // cost two more fibers and a sleep for every call.
    type Call = Extract<Engine.Effect, { _tag: "Call" }>
    interface InFlight {
      readonly call: Call
      readonly operation: string
      readonly deadline: number
      fiber: Fiber.RuntimeFiber<void> | undefined
    }
    const inFlight = new Map<number, InFlight>()
    let sweeper: { readonly generation: number; at: number; fiber: Fiber.RuntimeFiber<void> | undefined } | undefined
    let sweeperGeneration = 0

    const reply = (call: Call, response: Engine.Response) =>
      offer({ _tag: "Reply", requestId: call.requestId, sentAt: call.sentAt, request: call.request, response })

    /**
     * Fails every call whose deadline has passed and returns how long to sleep until the next one
     * (undefined: none left, or this sweeper was replaced). Uninterruptible: a call taken out of
     * `inFlight` always gets its reply.
     */
    const sweepOnce = (generation: number): Effect.Effect<number | undefined> =>
      Effect.uninterruptible(Effect.gen(function*() {
        if (sweeper?.generation !== generation) return undefined
        const now = yield* Term.monotonicMillis
        let next = Number.POSITIVE_INFINITY
        for (const [requestId, pending] of inFlight) {
          if (pending.deadline > now) {
            next = Math.min(next, pending.deadline)
            continue
          }
          inFlight.delete(requestId)
          if (pending.fiber !== undefined) yield* interruptSignal(pending.fiber)
          yield* Metric.increment(metricsFor(pending.operation).failure)
          yield* reply(pending.call, {
            _tag: "Failed",
            error: new BackendError({
              backend: backend.backend,
              operation: pending.operation,
              cause: `timed out after ${Math.round(pending.call.timeout)} ms`
            }).message
          })
        }
        if (next === Number.POSITIVE_INFINITY) {
          sweeper = undefined
          return undefined
        }
        sweeper.at = next
        return Math.max(0, Math.ceil(next - now))
      }))

    const runSweeper = (generation: number, firstWait: number) =>
      Effect.gen(function*() {
        let wait: number | undefined = firstWait
        while (wait !== undefined) {
          yield* Effect.sleep(Duration.millis(wait))
          wait = yield* sweepOnce(generation)
        }
      })

    /** Makes sure a sweeper wakes by `at`, replacing one that would wake later. */
    const sweepBy = (at: number, now: number): Effect.Effect<void> =>
      Effect.suspend(() => {
        if (sweeper !== undefined && sweeper.at <= at) return Effect.void
        const previous = sweeper?.fiber
        const current = { generation: ++sweeperGeneration, at, fiber: undefined as Fiber.RuntimeFiber<void> | undefined }
        sweeper = current
        return runSweeper(current.generation, Math.max(0, Math.ceil(at - now))).pipe(
          Effect.forkIn(scope),
          Effect.flatMap((fiber) => {
            current.fiber = fiber
            return previous === undefined ? Effect.void : interruptSignal(previous)
          })
        )
      })

    const performCall = (call: Call, now: number): Effect.Effect<void> => {
      const operation = operationName(call.request)
      const metrics = metricsFor(operation)
      // Whole millis: TestClock cannot represent fractional instants as nanoseconds.
      const pending: InFlight = { call, operation, deadline: now + Math.ceil(call.timeout), fiber: undefined }
      inFlight.set(call.requestId, pending)
      return toResponse(backend, call.request).pipe(
        Effect.tapBoth({
          onFailure: () => Metric.increment(metrics.failure),
          onSuccess: () => Metric.increment(metrics.success)
        }),
        Metric.trackDuration(metrics.latency),
        Effect.withSpan(`simba.${operation}`, { attributes: { backend: backend.backend }, captureStackTrace: false }),
        Effect.catchAll((error): Effect.Effect<Engine.Response> =>
          Effect.succeed({ _tag: "Failed", error: error instanceof Error ? error.message : String(error) })
        ),
        // The sweeper may have answered for it already.
        Effect.flatMap((response) => inFlight.delete(call.requestId) ? reply(call, response) : Effect.void),
        Effect.asVoid,
        Effect.forkIn(scope),
        Effect.flatMap((fiber) => {
          pending.fiber = fiber
          return sweepBy(pending.deadline, now)
        })
      )
    }

    const cancelTimer = (key: string) =>
      Effect.suspend(() => {
        const fiber = timers.get(key)
        timers.delete(key)
        return fiber === undefined ? Effect.void : interruptSignal(fiber)
      })

    const onElected = (effect: Extract<Engine.Effect, { _tag: "Elected" }>) =>
      Effect.gen(function*() {
        const revoked = yield* Deferred.make<Term.RevokeReason>()
        const term = Term.make({
          name: effect.name,
          token: effect.token,
          sessionId: effect.sessionId,
          deadline: Effect.sync(() => deadlines.get(effect.sessionSeq) ?? Number.NEGATIVE_INFINITY),
          revoked
        })
        const live: LiveTerm = { term, revoked, work: undefined, handle: effect.handle, group: effect.group }
        terms.set(effect.termId, live)
        yield* Metric.increment(termsWon)
        yield* Metric.update(leaderGauge, terms.size)
        const hook = effect.group === undefined ? hooks.get(effect.handle) : groupHooks.get(effect.group)
        const work = hook === undefined ? Option.none() : yield* hook.onElected(term, effect.partition)
        if (Option.isSome(work)) {
          live.work = yield* work.value.pipe(
            Effect.catchAllCause((cause) =>
              Cause.isInterruptedOnly(cause)
                ? Effect.void
                : Effect.logError(`leader work for ${effect.name} failed`, cause)
            ),
            Effect.ensuring(offer({ _tag: "WorkExited", handle: effect.handle, termId: effect.termId })),
            // Not in the client's scope: closing must not wait for work that ignores interruption
            // longer than the handover allows (the engine bounds it by the deadline). Every term is
            // revoked, and so its work interrupted, before the client closes.
            Effect.forkDaemon
          )
        } else if (effect.hasWork) {
          // The engine waits for the work it was told of; for a term without work it waits for nothing.
          yield* offer({ _tag: "WorkExited", handle: effect.handle, termId: effect.termId })
        }
      })

    const onRevoked = (effect: Extract<Engine.Effect, { _tag: "Revoked" }>) =>
      Effect.gen(function*() {
        const live = terms.get(effect.termId)
        if (live === undefined) return
        terms.delete(effect.termId)
        yield* Deferred.succeed(live.revoked, effect.reason)
        yield* Metric.increment(revocationsByReason[effect.reason])
        yield* Metric.update(leaderGauge, terms.size)
        // The engine never waits for the work: interruption is forked.
        if (live.work !== undefined) yield* interruptSignal(live.work)
        const hook = live.group === undefined ? hooks.get(live.handle) : groupHooks.get(live.group)
        if (hook !== undefined) yield* hook.onRevoked(live.term, effect.reason)
      })

    const perform = (effect: Engine.Effect, now: number): Effect.Effect<void> => {
      switch (effect._tag) {
        case "Call":
          return performCall(effect, now)
        case "Arm":
          return cancelTimer(effect.key).pipe(
            Effect.zipRight(
              // Whole millis: TestClock cannot represent fractional instants as nanoseconds.
              Effect.sleep(Duration.millis(Math.max(0, Math.ceil(effect.at - now)))).pipe(
                Effect.zipRight(offer({ _tag: "Timer", key: effect.key, id: effect.id })),
                Effect.asVoid,
                Effect.forkIn(scope)
              )
            ),
            Effect.map((fiber) => {
              timers.set(effect.key, fiber)
            })
          )
        case "Disarm":
          return cancelTimer(effect.key)
        case "Deadline":
          return Effect.sync(() => {
            deadlines.set(effect.sessionSeq, effect.deadline)
          })
        case "Elected":
          return onElected(effect)
        case "Revoked":
          return onRevoked(effect)
        case "Complete":
          return Effect.suspend(() => {
            const deferred = completions.get(effect.completion)
            completions.delete(effect.completion)
            return deferred === undefined ? Effect.void : Deferred.succeed(deferred, effect.outcome)
          })
        case "Publish":
          return Effect.zipRight(
            effect.event._tag === "SessionLeaseShortened"
              ? Effect.logWarning(`Simba: ${format(effect.event)}: the backend granted less than leaseDuration`)
              : Effect.void,
            PubSub.publish(pubsub, effect.event)
          )
        case "Members":
          // The group view lives in the engine state, where `snapshot` reads it.
          return Effect.void
      }
    }

    const loop = Effect.gen(function*() {
      const event = yield* Queue.take(events)
      const now = yield* Term.monotonicMillis
      const [next, effects] = Engine.step(yield* Ref.get(state), event, now)
      yield* Ref.set(state, next)
      for (const effect of effects) yield* perform(effect, now)
    }).pipe(Effect.forever)

    yield* Effect.forkIn(loop, scope)
    yield* backend.hints.pipe(
      Stream.runForEach((hint) =>
        Effect.flatMap(Ref.get(state), (current) => Engine.wantsHint(current, hint) ? offer({ _tag: "Hint", hint }) : Effect.void)
      ),
      Effect.forkIn(scope)
    )
    yield* offer({ _tag: "Boot" })

    const close = request((completion) => ({ _tag: "Close", completion })).pipe(Effect.asVoid)
    // Closing the scope closes the session first (finalizers run in reverse order), then the fibers.
    yield* Scope.addFinalizer(parentScope, Effect.zipRight(close, shutDown))

    // -------------------------------------------------------------------------------------------------
    // Elections
    // -------------------------------------------------------------------------------------------------

    const failStart = (name: string, outcome: Engine.Outcome): Effect.Effect<void, ElectionError> => {
      switch (outcome._tag) {
        case "Ok":
          return Effect.void
        case "AlreadyStarted":
          return Effect.fail(new ElectionAlreadyStartedError({ name }))
        case "Closed":
          return Effect.fail(new SimbaClosedError())
      }
    }

    /** Registers hooks, starts the election and stops it (awaiting the handover) when the scope closes. */
    const startHandle = (
      name: string,
      kind: "election" | "lock",
      hasWork: boolean,
      handleHooks: Hooks
    ): Effect.Effect<{ readonly handle: number; readonly stop: Effect.Effect<void> }, ElectionError, Scope.Scope> =>
      Effect.gen(function*() {
        yield* LeaseName.validate(name)
        const handle = nextId++
        hooks.set(handle, handleHooks)
        const stop = request((completion) => ({ _tag: "Stop", handle, completion })).pipe(
          Effect.zipRight(Effect.sync(() => hooks.delete(handle))),
          Effect.asVoid
        )
        // As `acquireRelease` (the start cannot be interrupted halfway, and `stop` is registered with
        // it), but a plain scope finalizer: `stop` needs none of the caller's fiber refs, and restoring
        // them (two diffs and two patches of every fiber ref) cost more than the stop itself.
        yield* Effect.uninterruptible(Effect.flatMap(Effect.scope, (scope) =>
          request((completion) => ({ _tag: "Start", handle, name, kind, hasWork, completion })).pipe(
            Effect.flatMap((outcome) => failStart(name, outcome)),
            Effect.tapError(() => Effect.sync(() => hooks.delete(handle))),
            Effect.zipRight(Scope.addFinalizer(scope, stop))
          )))
        return { handle, stop }
      })

    const election = (name: string, options?: ElectionOptions): Effect.Effect<Election, ElectionError, Scope.Scope> =>
      Effect.gen(function*() {
        const current = yield* SubscriptionRef.make(Option.none<Term.Term>())
        const work = options?.work
        const { handle, stop } = yield* startHandle(name, "election", work !== undefined, {
          onElected: (term) => Effect.as(SubscriptionRef.set(current, Option.some(term)), Option.fromNullable(work?.(term))),
          onRevoked: () => SubscriptionRef.set(current, Option.none())
        })
        const terms = current.changes.pipe(Stream.filterMap((term) => term), Stream.changes)
        return {
          name,
          status: Effect.map(Ref.get(state), (s) => {
            const e = s.elections.get(handle)
            return e === undefined ? "STOPPED" : Engine.publicStatus(e)
          }),
          term: SubscriptionRef.get(current),
          terms,
          awaitLeader: terms.pipe(Stream.runHead, Effect.flatMap(Option.match({ onNone: () => Effect.never, onSome: Effect.succeed }))),
          stepDown: (cooldown) =>
            Effect.asVoid(
              request((completion) => ({
                _tag: "StepDown",
                handle,
                cooldown: Duration.toMillis(Duration.decode(cooldown)),
                completion
              }))
            ),
          stop
        }
      })

    /** Holds the lock `name` until the scope closes; `onRevoked` runs (in the loop) when the term ends. */
    const lockWith = (
      name: string,
      options: LockOptions | undefined,
      onRevoked: () => Effect.Effect<void>
    ): Effect.Effect<Term.Term, LockError, Scope.Scope> =>
      Effect.gen(function*() {
        const won = yield* Deferred.make<Term.Term>()
        yield* startHandle(name, "lock", false, {
          onElected: (term) => Effect.as(Deferred.succeed(won, term), Option.none()),
          onRevoked
        })
        const timeout = options?.timeout
        if (timeout === undefined) return yield* Deferred.await(won)
        return yield* Deferred.await(won).pipe(
          Effect.timeoutFail({
            duration: timeout,
            onTimeout: () => new LockTimeoutError({ name, timeout: Duration.format(Duration.decode(timeout)) })
          })
        )
      })

    const lock = (name: string, options?: LockOptions): Effect.Effect<Term.Term, LockError, Scope.Scope> =>
      lockWith(name, options, () => Effect.void)

    const withLock = <A, E, R>(
      name: string,
      body: Effect.Effect<A, E, R> | ((term: Term.Term) => Effect.Effect<A, E, R>),
      options?: LockOptions
    ): Effect.Effect<A, E | LockError, R> =>
      Effect.scoped(
        Effect.gen(function*() {
          // The body runs in a child fiber that the term's revocation interrupts (no race fiber).
          let running: Fiber.RuntimeFiber<A, E> | undefined
          const term = yield* lockWith(
            name,
            options,
            () => running === undefined ? Effect.void : interruptSignal(running)
          )
          const fiber = yield* Effect.fork(Effect.isEffect(body) ? body : body(term))
          running = fiber
          // Revoked between the grant and the fork: the hook found no fiber to interrupt.
          if (Option.isSome(yield* term.revokedReason)) yield* interruptSignal(fiber)
          const exit = yield* Fiber.await(fiber)
          if (Exit.isFailure(exit) && Cause.isInterruptedOnly(exit.cause)) {
            const reason = yield* term.revokedReason
            if (Option.isSome(reason)) return yield* new LockLostError({ name, token: term.token, reason: reason.value })
          }
          return yield* exit
        })
      )

    const runWhileLeader = <E, R>(
      name: string,
      work: (term: Term.Term) => Effect.Effect<unknown, E, R>
    ): Effect.Effect<never, ElectionError, R> =>
      Effect.flatMap(Effect.context<R>(), (context) =>
        Effect.scoped(
          Effect.zipRight(
            election(name, { work: (term) => Effect.provide(work(term), context) }),
            Effect.never
          )
        ))

    const schedule = <Out, E, R, R2>(
      name: string,
      schedule: Schedule.Schedule<Out, unknown, R2>,
      task: (term: Term.Term) => Effect.Effect<unknown, E, R>
    ): Effect.Effect<never, ElectionError, R | R2> =>
      runWhileLeader(name, (term) =>
        task(term).pipe(
          Effect.catchAllCause((cause) =>
            Cause.isInterruptedOnly(cause)
              ? Effect.failCause(cause)
              : Effect.logWarning(`scheduled task ${name} failed; the next run still happens`, cause)
          ),
          Effect.repeat(schedule)
        ))

    const partitionGroup = <E, R>(
      group: string,
      partitions: number,
      work: (partition: number, term: Term.Term) => Effect.Effect<unknown, E, R>
    ): Effect.Effect<never, ElectionError | SimbaConfigError, R> =>
      Effect.gen(function*() {
        if (!Number.isSafeInteger(partitions) || partitions < 1) {
          return yield* new SimbaConfigError({ field: "partitions", rule: "must be a positive integer" })
        }
        yield* LeaseName.validate(group)
        yield* LeaseName.validate(LeaseName.partitionName(group, partitions - 1))
        const context = yield* Effect.context<R>()
        return yield* Effect.scoped(Effect.gen(function*() {
          const handle = nextId++
          const join = request((completion) => ({ _tag: "Join", handle, group, partitions, completion })).pipe(
            Effect.flatMap((outcome) => failStart(group, outcome)),
            Effect.zipRight(Effect.sync(() => groupHooks.set(group, {
              onElected: (term, partition) =>
                Effect.succeed(
                  partition === undefined ? Option.none() : Option.some(Effect.provide(work(partition, term), context))
                ),
              onRevoked: () => Effect.void
            })))
          )
          const leave = request((completion) => ({ _tag: "Leave", handle, completion })).pipe(
            Effect.zipRight(Effect.sync(() => groupHooks.delete(group)))
          )
          yield* Effect.acquireRelease(join, () => leave)
          return yield* Effect.never
        }))
      })

    // -------------------------------------------------------------------------------------------------
    // Snapshot
    // -------------------------------------------------------------------------------------------------

    const snapshot = Effect.gen(function*() {
      const s = yield* Ref.get(state)
      const now = yield* Term.monotonicMillis
      const left = (deadline: number) => Duration.millis(Math.max(0, deadline - now))
      const sessionDeadline = s.session.status === "LIVE" || s.session.status === "SUSPENDED" ? s.session.deadline : now
      return {
        session: { id: s.session.id, status: s.session.status, remaining: left(sessionDeadline) },
        elections: Array.from(s.elections.values()).map((e) => ({
          name: e.name,
          kind: e.kind,
          status: Engine.publicStatus(e),
          token: e.term?.token,
          remaining: e.term !== undefined && !e.term.revoked
            ? left(deadlines.get(e.term.sessionSeq) ?? now)
            : Duration.zero
        })),
        groups: Array.from(s.groups.values()).map((g) => ({
          group: g.group,
          partitions: g.partitions,
          members: g.members,
          owned: g.owned
        }))
      } satisfies SimbaSnapshot
    })

    return {
      withLock,
      lock,
      runWhileLeader,
      election,
      schedule,
      partitionGroup,
      events: Stream.fromPubSub(pubsub),
      snapshot,
      close
    } satisfies SimbaClient
  })
