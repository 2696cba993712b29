/**
 * Effect's metric registry in the Prometheus text exposition format (version 0.0.4): one `# HELP`
 * and `# TYPE` per metric name, then a sample per label set. Counters and gauges as they are;
 * histograms as cumulative `_bucket{le=...}` (ending with `+Inf`), `_sum`, `_count`; summaries as
 * `{quantile=...}`, `_sum`, `_count`; frequencies as a counter with one sample per observed value
 * (label `key`). Names and label names are sanitised, label values and help texts escaped.
 */
import * as Option from "effect/Option"
import type * as MetricPair from "effect/MetricPair"
import * as MetricState from "effect/MetricState"

/** The content type of the text format. */
export const contentType = "text/plain; version=0.0.4; charset=utf-8"

const metricName = (name: string): string => {
  const cleaned = name.replace(/[^a-zA-Z0-9_:]/g, "_")
  return /^[a-zA-Z_:]/.test(cleaned) ? cleaned : `_${cleaned}`
}

const labelName = (name: string): string => {
  const cleaned = name.replace(/[^a-zA-Z0-9_]/g, "_")
  return /^[a-zA-Z_]/.test(cleaned) ? cleaned : `_${cleaned}`
}

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

const labels = (pairs: Labels): string =>
  pairs.length === 0
    ? ""
    : `{${pairs.map(([key, value]) => `${labelName(key)}="${escapeLabelValue(value)}"`).join(",")}}`

const sample = (name: string, pairs: Labels, value: number | bigint): string => `${name}${labels(pairs)} ${number(value)}`

/** One series (name and label set) of a family, its samples merged across equal keys. */
type Series =
  | { readonly kind: "value"; readonly tags: Labels; value: number | bigint }
  | {
    readonly kind: "histogram"
    readonly tags: Labels
    readonly buckets: Map<number, number>
    sum: number
    count: number
  }
  | { readonly kind: "lines"; readonly lines: ReadonlyArray<string> }

interface Family {
  readonly type: "counter" | "gauge" | "histogram" | "summary"
  readonly help: string | undefined
  readonly series: Map<string, Series>
}

const add = (a: number | bigint, b: number | bigint): number | bigint =>
  typeof a === "bigint" && typeof b === "bigint" ? a + b : Number(a) + Number(b)

/**
 * The registry's metrics as exposition text (ends with a line feed). Effect's registry may hold
 * several keys that print the same series (a histogram key built twice compares unequal): their
 * counts, sums and buckets are added, as one series must appear once.
 */
export const format = (pairs: ReadonlyArray<MetricPair.MetricPair.Untyped>): string => {
  const families = new Map<string, Family>()
  const familyOf = (name: string, type: Family["type"], help: string | undefined): Family | undefined => {
    const existing = families.get(name)
    if (existing !== undefined) return existing.type === type ? existing : undefined // one type per name
    const family: Family = { type, help, series: new Map() }
    families.set(name, family)
    return family
  }
  for (const pair of pairs) {
    const name = metricName(pair.metricKey.name)
    const help = Option.getOrUndefined(pair.metricKey.description)
    const tags: Labels = pair.metricKey.tags.map((tag) => [tag.key, tag.value] as const)
    const id = labels([...tags].sort(([a], [b]) => a < b ? -1 : a > b ? 1 : 0))
    const state: unknown = pair.metricState
    if (MetricState.isCounterState(state) || MetricState.isGaugeState(state)) {
      const counter = MetricState.isCounterState(state)
      const family = familyOf(name, counter ? "counter" : "gauge", help)
      if (family === undefined) continue
      const value = MetricState.isCounterState(state) ? state.count : state.value
      const seen = family.series.get(id)
      if (seen?.kind === "value") seen.value = add(seen.value, value)
      else family.series.set(id, { kind: "value", tags, value })
    } else if (MetricState.isHistogramState(state)) {
      const family = familyOf(name, "histogram", help)
      if (family === undefined) continue
      let seen = family.series.get(id)
      if (seen?.kind !== "histogram") {
        seen = { kind: "histogram", tags, buckets: new Map(), sum: 0, count: 0 }
        family.series.set(id, seen)
      }
      for (const [boundary, count] of state.buckets) seen.buckets.set(boundary, (seen.buckets.get(boundary) ?? 0) + count)
      seen.sum += state.sum
      seen.count += state.count
    } else if (MetricState.isSummaryState(state)) {
      // Quantiles cannot be added: the first key of a series wins.
      const family = familyOf(name, "summary", help)
      if (family === undefined || family.series.has(id)) continue
      family.series.set(id, {
        kind: "lines",
        lines: [
          ...state.quantiles.map(([quantile, value]) =>
            sample(name, [...tags, ["quantile", number(quantile)]], Option.getOrElse(value, () => Number.NaN))
          ),
          sample(`${name}_sum`, tags, state.sum),
          sample(`${name}_count`, tags, state.count)
        ]
      })
    } else if (MetricState.isFrequencyState(state)) {
      const family = familyOf(name, "counter", help)
      if (family === undefined) continue
      for (const [key, count] of state.occurrences) {
        const withKey: Labels = [...tags, ["key", key]]
        const keyId = `${id}/${key}`
        const seen = family.series.get(keyId)
        if (seen?.kind === "value") seen.value = add(seen.value, count)
        else family.series.set(keyId, { kind: "value", tags: withKey, value: count })
      }
    }
  }
  const out: Array<string> = []
  for (const [name, family] of families) {
    if (family.help !== undefined) out.push(`# HELP ${name} ${escapeHelp(family.help)}`)
    out.push(`# TYPE ${name} ${family.type}`)
    for (const series of family.series.values()) {
      switch (series.kind) {
        case "value":
          out.push(sample(name, series.tags, series.value))
          break
        case "histogram": {
          const boundaries = [...series.buckets.keys()].sort((a, b) => a - b)
          for (const boundary of boundaries) {
            out.push(sample(`${name}_bucket`, [...series.tags, ["le", number(boundary)]], series.buckets.get(boundary)!))
          }
          if (boundaries.at(-1) !== Number.POSITIVE_INFINITY) {
            out.push(sample(`${name}_bucket`, [...series.tags, ["le", "+Inf"]], series.count))
          }
          out.push(sample(`${name}_sum`, series.tags, series.sum), sample(`${name}_count`, series.tags, series.count))
          break
        }
        case "lines":
          out.push(...series.lines)
      }
    }
  }
  return out.length === 0 ? "" : `${out.join("\n")}\n`
}
