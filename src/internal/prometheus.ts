/**
 * Effect's metric registry in the Prometheus text exposition format (version 0.0.4): per metric
 * family one `# HELP` (the key's description, else a text naming the metric) and one `# TYPE`, then
 * a sample per label set.
 * - Counters: `counter` when the key is incremental (it never goes down), else `gauge`: Effect's
 *   plain counters also take negative updates (`effect_fiber_active` counts fibers up and down), and
 *   a Prometheus counter that goes down reads as a reset.
 * - Histograms: cumulative `_bucket{le=...}` ending with `+Inf`, `_sum`, `_count`; summaries:
 *   `{quantile=...}`, `_sum`, `_count`. One tagged with `time_unit` (Effect's `Metric.timer` tags
 *   `milliseconds`) is given in seconds, the base unit Prometheus expects: its boundaries, sum and
 *   quantiles converted, the name ending in `_seconds`, the label dropped.
 * - Frequencies: a counter with one sample per observed value (label `key`).
 * Names and label names are sanitised (a label that would repeat one the family adds, `le`,
 * `quantile` or `key`, is renamed `tag_<name>`; a name that repeats in one label set keeps its first
 * value), label values and help texts escaped; a family whose sample names clash with an earlier
 * family's is left out, as one series must appear once.
 */
import * as MetricKeyType from "effect/MetricKeyType"
import type * as MetricPair from "effect/MetricPair"
import * as MetricState from "effect/MetricState"
import * as Option from "effect/Option"

/** The content type of the text format. */
export const contentType = "text/plain; version=0.0.4; charset=utf-8"

/** What a `time_unit` label's value is divided by to give seconds. */
const perSecond: Readonly<Record<string, number>> = { nanoseconds: 1e9, microseconds: 1e6, milliseconds: 1e3, seconds: 1 }

/** Help texts of the Effect runtime's own metrics, which have no description. */
const runtimeHelp: Readonly<Record<string, string>> = {
  effect_fiber_started: "Effect runtime: fibers started",
  effect_fiber_active: "Effect runtime: fibers running now",
  effect_fiber_successes: "Effect runtime: fibers that succeeded",
  effect_fiber_failures: "Effect runtime: fibers that failed",
  effect_fiber_lifetimes: "Effect runtime: fiber lifetimes"
}

const metricName = (name: string): string => {
  const cleaned = name.replace(/[^a-zA-Z0-9_:]/g, "_")
  return /^[a-zA-Z_:]/.test(cleaned) ? cleaned : `_${cleaned}`
}

/** `[a-zA-Z_][a-zA-Z0-9_]*`, without the `__` prefix Prometheus reserves for itself. */
const labelName = (name: string): string => {
  const cleaned = name.replace(/[^a-zA-Z0-9_]/g, "_").replace(/^__+/, "_")
  return /^[a-zA-Z_]/.test(cleaned) ? cleaned : `_${cleaned}`
}

/** A duration metric's name in seconds: `x_milliseconds` / `x_ms` / `x` become `x_seconds`. */
const secondsName = (name: string): string =>
  /_seconds$/.test(name) ? name : `${name.replace(/_(nanoseconds|microseconds|milliseconds|ns|us|ms)$/, "")}_seconds`

/** Label values: backslash, double quote and line feed escaped. */
export const escapeLabelValue = (value: string): string =>
  value.replace(/\\/g, "\\\\").replace(/"/g, "\\\"").replace(/\n/g, "\\n")

const escapeHelp = (text: string): string => text.replace(/\\/g, "\\\\").replace(/\n/g, "\\n")

const number = (value: number | bigint): string => {
  if (typeof value === "bigint") return value.toString()
  if (Number.isNaN(value)) return "NaN"
  if (value === Number.POSITIVE_INFINITY) return "+Inf"
  if (value === Number.NEGATIVE_INFINITY) return "-Inf"
  return String(value)
}

type Labels = ReadonlyArray<readonly [string, string]>

/** The key's tags as labels: names sanitised, `reserved` (the family's own label) renamed, repeats dropped. */
const cleanLabels = (tags: Labels, reserved: string | undefined): Labels => {
  const out: Array<readonly [string, string]> = []
  const names = new Set<string>()
  for (const [key, value] of tags) {
    const cleaned = labelName(key)
    const name = cleaned === reserved ? `tag_${cleaned}` : cleaned
    if (names.has(name)) continue
    names.add(name)
    out.push([name, value])
  }
  return out
}

const seriesId = (pairs: Labels): string => JSON.stringify([...pairs].sort(([a], [b]) => a < b ? -1 : a > b ? 1 : 0))

const labels = (pairs: Labels): string =>
  pairs.length === 0 ? "" : `{${pairs.map(([key, value]) => `${key}="${escapeLabelValue(value)}"`).join(",")}}`

const sample = (name: string, pairs: Labels, value: number | bigint): string => `${name}${labels(pairs)} ${number(value)}`

/** One series (label set) of a family, its samples merged across keys that print the same series. */
type Series =
  | { readonly kind: "value"; readonly labels: Labels; value: number | bigint }
  | { readonly kind: "histogram"; readonly labels: Labels; readonly buckets: Map<number, number>; sum: number; count: number }
  | { readonly kind: "lines"; readonly lines: ReadonlyArray<string> }

interface Family {
  readonly type: "counter" | "gauge" | "histogram" | "summary"
  readonly help: string
  readonly series: Map<string, Series>
}

const add = (a: number | bigint, b: number | bigint): number | bigint =>
  typeof a === "bigint" && typeof b === "bigint" ? a + b : Number(a) + Number(b)

/** The names a family's samples use (its `# TYPE` name among them). */
const sampleNames = (name: string, type: Family["type"]): ReadonlyArray<string> =>
  type === "histogram"
    ? [name, `${name}_bucket`, `${name}_sum`, `${name}_count`]
    : type === "summary"
    ? [name, `${name}_sum`, `${name}_count`]
    : [name]

/**
 * The registry's metrics as exposition text (ends with a line feed). Effect's registry may hold
 * several keys that print the same series (a histogram key built twice compares unequal): their
 * counts, sums and buckets are added, as one series must appear once.
 */
export const format = (pairs: ReadonlyArray<MetricPair.MetricPair.Untyped>): string => {
  const families = new Map<string, Family>()
  const familyOf = (name: string, type: Family["type"], help: string): Family | undefined => {
    const existing = families.get(name)
    if (existing !== undefined) return existing.type === type ? existing : undefined // one type per name
    const family: Family = { type, help, series: new Map() }
    families.set(name, family)
    return family
  }
  for (const pair of pairs) {
    const key = pair.metricKey
    const state: unknown = pair.metricState
    const timed = MetricState.isHistogramState(state) || MetricState.isSummaryState(state)
    const unit = timed ? key.tags.find((tag) => tag.key === "time_unit" && perSecond[tag.value] !== undefined) : undefined
    const divisor = unit === undefined ? 1 : perSecond[unit.value]!
    const name = metricName(unit === undefined ? key.name : secondsName(key.name))
    const described = Option.getOrUndefined(key.description) ?? runtimeHelp[key.name] ?? `metric ${key.name}`
    const help = unit === undefined ? described : `${described} (seconds)`
    const tags: Labels = key.tags.filter((tag) => tag !== unit).map((tag) => [tag.key, tag.value] as const)
    if (MetricState.isCounterState(state) || MetricState.isGaugeState(state)) {
      const counter = MetricState.isCounterState(state)
      const monotonic = counter && MetricKeyType.isCounterKey(key.keyType) && key.keyType.incremental
      const family = familyOf(name, monotonic ? "counter" : "gauge", help)
      if (family === undefined) continue
      const value = counter ? state.count : state.value
      const own = cleanLabels(tags, undefined)
      const id = seriesId(own)
      const seen = family.series.get(id)
      if (seen?.kind === "value") seen.value = add(seen.value, value)
      else family.series.set(id, { kind: "value", labels: own, value })
    } else if (MetricState.isHistogramState(state)) {
      const family = familyOf(name, "histogram", help)
      if (family === undefined) continue
      const own = cleanLabels(tags, "le")
      const id = seriesId(own)
      let seen = family.series.get(id)
      if (seen?.kind !== "histogram") {
        seen = { kind: "histogram", labels: own, buckets: new Map(), sum: 0, count: 0 }
        family.series.set(id, seen)
      }
      for (const [boundary, count] of state.buckets) {
        const le = boundary / divisor
        seen.buckets.set(le, (seen.buckets.get(le) ?? 0) + count)
      }
      seen.sum += state.sum / divisor
      seen.count += state.count
    } else if (MetricState.isSummaryState(state)) {
      // Quantiles cannot be added: the first key of a series wins.
      const family = familyOf(name, "summary", help)
      const own = cleanLabels(tags, "quantile")
      const id = seriesId(own)
      if (family === undefined || family.series.has(id)) continue
      family.series.set(id, {
        kind: "lines",
        lines: [
          ...state.quantiles.map(([quantile, value]) =>
            sample(name, [...own, ["quantile", number(quantile)]], Option.getOrElse(value, () => Number.NaN) / divisor)
          ),
          sample(`${name}_sum`, own, state.sum / divisor),
          sample(`${name}_count`, own, state.count)
        ]
      })
    } else if (MetricState.isFrequencyState(state)) {
      const family = familyOf(name, "counter", help)
      if (family === undefined) continue
      const own = cleanLabels(tags, "key")
      for (const [word, count] of state.occurrences) {
        const withKey: Labels = [...own, ["key", word]]
        const id = seriesId(withKey)
        const seen = family.series.get(id)
        if (seen?.kind === "value") seen.value = add(seen.value, count)
        else family.series.set(id, { kind: "value", labels: withKey, value: count })
      }
    }
  }
  const out: Array<string> = []
  const claimed = new Set<string>()
  for (const [name, family] of families) {
    const names = sampleNames(name, family.type)
    if (family.series.size === 0 || names.some((n) => claimed.has(n))) continue
    for (const n of names) claimed.add(n)
    out.push(`# HELP ${name} ${escapeHelp(family.help)}`, `# TYPE ${name} ${family.type}`)
    for (const series of family.series.values()) {
      switch (series.kind) {
        case "value":
          out.push(sample(name, series.labels, series.value))
          break
        case "histogram": {
          const boundaries = [...series.buckets.keys()].sort((a, b) => a - b)
          for (const boundary of boundaries) {
            out.push(sample(`${name}_bucket`, [...series.labels, ["le", number(boundary)]], series.buckets.get(boundary)!))
          }
          if (boundaries.at(-1) !== Number.POSITIVE_INFINITY) {
            out.push(sample(`${name}_bucket`, [...series.labels, ["le", "+Inf"]], series.count))
          }
          out.push(sample(`${name}_sum`, series.labels, series.sum), sample(`${name}_count`, series.labels, series.count))
          break
        }
        case "lines":
          out.push(...series.lines)
      }
    }
  }
  return out.length === 0 ? "" : `${out.join("\n")}\n`
}
