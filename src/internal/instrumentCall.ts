/**
 * The instrumentation `LeaseBackend.make` wraps every backend call in: `BackendError` for failures,
 * the metrics `simba_backend_calls_total` and `simba_backend_call_duration`, and a span when a tracer
 * is installed; for an operation's Effect and for its direct form (`LeaseBackend.DirectCalls`).
 */
import * as Cause from "effect/Cause"
import * as Clock from "effect/Clock"
import * as Context from "effect/Context"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Either from "effect/Either"
import type * as Fiber from "effect/Fiber"
import * as FiberRef from "effect/FiberRef"
import type * as MetricLabel from "effect/MetricLabel"
import type * as Tracer from "effect/Tracer"
import type { CallContext, Done, Operation } from "../LeaseBackend.js"
import { BackendError } from "./backendError.js"
import * as Metrics from "./metrics.js"

const callCounter = (labels: Record<string, string>) =>
  Metrics.counter("simba_backend_calls_total", "backend calls by backend, operation and outcome", labels)

const callLatency = (labels: Record<string, string>) =>
  Metrics.timer("simba_backend_call_duration", "backend call latency by backend and operation", labels)

/**
 * The tracer Effect provides when nobody installed one: its spans are never exported, so a call
 * under it gets none (a span costs more than a memory backend's whole call).
 */
let defaultTracer: Tracer.Tracer | undefined
export const isDefaultTracer = (tracer: Tracer.Tracer): boolean => {
  defaultTracer ??= Effect.runSync(Effect.tracer)
  return tracer === defaultTracer
}

/**
 * The wrapper of one operation's calls, built once per operation: tags failures as `BackendError`,
 * counts outcomes (a call interrupted by its timeout counts as a failure), times it, and opens a span
 * when a tracer is installed. The metrics are updated as `Metric.increment` and `Metric.trackDuration`
 * would (the fiber's metric labels, the `Clock`), in one step at the call's exit. Written with the
 * runtime's primitives (one fiber read, one match) rather than `onExit` and `mapError`: it wraps
 * every backend call, and each combinator is a runtime operation and an allocation.
 */
export const instrumentCall = (backend: string) => (operation: Operation) => {
  const success = callCounter({ backend, operation, outcome: "success" })
  const failure = callCounter({ backend, operation, outcome: "failure" })
  const latency = callLatency({ backend, operation })
  const tag = (cause: unknown): BackendError =>
    cause instanceof BackendError ? cause : new BackendError({ backend, operation, cause })
  const span = `simba.${operation}`
  const spanOptions = { attributes: { backend }, captureStackTrace: false } as const
  const exited = (
    succeeded: boolean,
    clock: Clock.Clock,
    started: bigint,
    labels: ReadonlyArray<MetricLabel.MetricLabel>
  ) => {
    ;(succeeded ? success : failure).unsafeUpdate(1, labels)
    latency.unsafeUpdate(Duration.nanos(clock.unsafeCurrentTimeNanos() - started), labels)
  }
  const measured = <A>(call: Effect.Effect<A, unknown>, fiber: Fiber.RuntimeFiber<unknown, unknown>): Effect.Effect<A, BackendError> => {
    const clock = Context.get(fiber.currentDefaultServices, Clock.Clock)
    const labels = fiber.getFiberRef(FiberRef.currentMetricLabels)
    const started = clock.unsafeCurrentTimeNanos()
    // As `onExit`: the region is uninterruptible, so an interrupted call is counted too.
    return Effect.uninterruptibleMask((restore) =>
      Effect.matchCauseEffect(restore(call), {
        onFailure: (cause) => {
          exited(false, clock, started, labels)
          // As `mapError`: the first failure tagged, or the cause as it is (a defect, an interruption).
          const failed = Cause.failureOrCause(cause)
          return Either.isLeft(failed) ? Effect.fail(tag(failed.left)) : Effect.failCause(failed.right)
        },
        onSuccess: (value) => {
          exited(true, clock, started, labels)
          return Effect.succeed(value)
        }
      })
    )
  }
  return {
    effect: <A>(call: Effect.Effect<A, unknown>): Effect.Effect<A, BackendError> =>
      Effect.withFiberRuntime((fiber) =>
        isDefaultTracer(fiber.currentTracer)
          ? measured(call, fiber)
          : Effect.withSpan(measured(call, fiber), span, spanOptions)
      ),
    /**
     * A direct call (`DirectCalls`): `start` is given the one callback that answers `done` (later
     * answers are ignored; a throw is a failure), measured as the Effect's are, without a span.
     */
    direct: <A>(
      context: CallContext,
      done: Done<A>,
      start: (answer: (answer: Either.Either<A, unknown>) => void) => void
    ): void => {
      const started = context.clock.unsafeCurrentTimeNanos()
      let open = true
      const answer = (result: Either.Either<A, unknown>) => {
        if (!open) return
        open = false
        exited(Either.isRight(result), context.clock, started, context.metricLabels)
        done(Either.mapLeft(result, tag))
      }
      try {
        start(answer)
      } catch (cause) {
        answer(Either.left(cause))
      }
    }
  }
}
