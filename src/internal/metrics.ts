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

/** A gauge whose key carries `labels`. */
export const gauge = (name: string, description: string, labels: Record<string, string>) =>
  Metric.fromMetricKey(MetricKey.taggedWithLabels(MetricKey.gauge(name, { description }), labelled(labels)))

/**
 * The term metrics of one `lease` label: terms won, terms held now (across this process's clients),
 * revocations by reason.
 */
export interface LeaseMetrics {
  readonly termsWon: Metric.Metric.Counter<number>
  readonly leaderTerms: Metric.Metric.Gauge<number>
  readonly revocations: Record<Term.RevokeReason, Metric.Metric.Counter<number>>
}

/**
 * Distinct `lease` labels per process; later names share the label `other`. A label is a time
 * series in every scraper, so its count must not grow with the names an application makes up (one
 * lock per order id). Partitions are labelled by their group, not by partition.
 */
export const maxLeaseLabels = 100

export const otherLease = "other"

const makeLeaseMetrics = (lease: string): LeaseMetrics => ({
  termsWon: counter("simba_terms_total", "terms won, by lease", { lease }),
  leaderTerms: gauge("simba_leader_terms", "terms held now, by lease", { lease }),
  revocations: Object.fromEntries(
    Object.keys(Term.RevokeReason).map((reason) => [
      reason,
      counter("simba_revocations_total", "terms revoked, by lease and reason", { lease, reason })
    ])
  ) as Record<Term.RevokeReason, Metric.Metric.Counter<number>>
})

// Module-wide like Effect's metric registry itself: the labels are per process, not per client.
const byLabel = new Map<string, LeaseMetrics>()

/** The `lease` label of a term: its group for a partition, else its name, capped at `maxLeaseLabels`. */
export const leaseLabel = (name: string, group: string | undefined): string => {
  const label = group ?? name
  return byLabel.has(label) || byLabel.size < maxLeaseLabels ? label : otherLease
}

/** The metrics of a term of `name` (in `group`, for a partition). */
export const forLease = (name: string, group: string | undefined): LeaseMetrics => {
  const label = leaseLabel(name, group)
  const existing = byLabel.get(label)
  if (existing !== undefined) return existing
  const made = makeLeaseMetrics(label)
  byLabel.set(label, made)
  return made
}
