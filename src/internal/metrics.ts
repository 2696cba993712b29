/**
 * The client's metrics. Every metric is built from a key that already carries its tags:
 * `Metric.tagged` would build (and hash) a new key on every update, a cost paid on every call.
 */
import * as Duration from "effect/Duration"
import * as Metric from "effect/Metric"
import * as MetricBoundaries from "effect/MetricBoundaries"
import * as MetricKey from "effect/MetricKey"
import * as MetricLabel from "effect/MetricLabel"
import * as Term from "../Term.js"

const labelled = (labels: Record<string, string>) =>
  Object.entries(labels).map(([key, value]) => MetricLabel.make(key, value))

/** A counter whose key carries `labels`. */
export const counter = (name: string, description: string, labels: Record<string, string>) =>
  Metric.fromMetricKey(
    MetricKey.taggedWithLabels(MetricKey.counter(name, { description, incremental: true }), labelled(labels))
  )

/** A latency histogram in milliseconds, with the buckets of `Metric.timer`. */
export const timer = (name: string, description: string, labels: Record<string, string>) =>
  Metric.fromMetricKey(
    MetricKey.taggedWithLabels(
      MetricKey.histogram(name, MetricBoundaries.exponential({ start: 0.5, factor: 2, count: 35 }), description),
      labelled({ ...labels, time_unit: "milliseconds" })
    )
  ).pipe(Metric.mapInput(Duration.toMillis))

export const termsWon = counter("simba_terms_total", "terms won", {})

export const leaderGauge = Metric.gauge("simba_leader_terms", { description: "terms this client currently holds" })

export const revocationsByReason = Object.fromEntries(
  Object.keys(Term.RevokeReason).map((reason) => [
    reason,
    counter("simba_revocations_total", "terms revoked, by reason", { reason })
  ])
) as Record<Term.RevokeReason, Metric.Metric.Counter<number>>
