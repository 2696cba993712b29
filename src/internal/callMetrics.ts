/**
 * What every backend call records: calls by backend, operation and outcome, their latency, and a
 * `simba.<operation>` span. Kept apart from the shell so it can move to the SPI's own constructor.
 */
import type * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Metric from "effect/Metric"
import type * as MetricKeyType from "effect/MetricKeyType"
import type * as MetricState from "effect/MetricState"
import { counter, timer } from "./metrics.js"

/** The metrics of one operation of one backend. */
export interface CallMetrics {
  readonly success: Metric.Metric.Counter<number>
  readonly failure: Metric.Metric.Counter<number>
  readonly latency: Metric.Metric<MetricKeyType.MetricKeyType.Histogram, Duration.Duration, MetricState.MetricState.Histogram>
}

/** The metrics of each operation of `backend`, built on first use and then reused for every call. */
export const forBackend = (backend: string): (operation: string) => CallMetrics => {
  const cache = new Map<string, CallMetrics>()
  return (operation) => {
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

/** Counts `call`'s outcome in `metrics`, records its latency and runs it in a `simba.<operation>` span. */
export const instrument = <A, E>(
  call: Effect.Effect<A, E>,
  backend: string,
  operation: string,
  metrics: CallMetrics
): Effect.Effect<A, E> =>
  call.pipe(
    Effect.tapBoth({
      onFailure: () => Metric.increment(metrics.failure),
      onSuccess: () => Metric.increment(metrics.success)
    }),
    Metric.trackDuration(metrics.latency),
    Effect.withSpan(`simba.${operation}`, { attributes: { backend }, captureStackTrace: false })
  )
