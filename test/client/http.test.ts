import { HttpApp } from "@effect/platform"
import { describe, expect, it } from "@effect/vitest"
import { Duration, Effect, Fiber, Layer, Metric, MetricBoundaries, RuntimeFlags } from "effect"
import { LeaseBackend, MemoryBackend, Simba } from "simba"
import { SimbaHttp } from "simba/http"
import { SimbaTest } from "simba/test"
import * as Metrics from "../../src/internal/metrics.js"
import { advance } from "./helpers.js"

describe("operations endpoint", () => {
  it.scoped("GET /simba answers the snapshot; GET /simba/health is 200 while LIVE, 503 when not", () =>
    Effect.gen(function*() {
      const memory = yield* MemoryBackend.make()
      const link = yield* SimbaTest.faulty(memory)
      const client = yield* Simba.make({ leaseDuration: "3 seconds" }).pipe(
        Effect.provideService(LeaseBackend.LeaseBackend, link.backend)
      )
      yield* client.election("reporter")
      yield* advance("200 millis")
      const runtime = yield* Layer.toRuntime(Layer.succeed(Simba.Simba, client))
      const handler = HttpApp.toWebHandlerRuntime(runtime)(Effect.flatten(SimbaHttp.router))
      const get = (path: string) => Effect.promise(() => handler(new Request(`http://localhost${path}`)))

      const snapshot = yield* get("/simba")
      expect(snapshot.status).toBe(200)
      const body = (yield* Effect.promise(() => snapshot.json())) as {
        readonly session: { readonly status: string }
        readonly elections: ReadonlyArray<unknown>
      }
      expect(body.session.status).toBe("LIVE")
      expect(body.elections).toEqual([
        expect.objectContaining({ name: "reporter", kind: "election", status: "LEADER", token: "1" })
      ])
      expect((yield* get("/simba/health")).status).toBe(200)

      // Renewals stop getting through: SUSPENDED, then the deadline passes and it is OPENING.
      yield* link.faults.pause()
      yield* advance("4 seconds")
      const health = yield* get("/simba/health")
      expect(health.status).toBe(503)
      const healthBody = (yield* Effect.promise(() => health.json())) as { readonly status: string }
      expect(healthBody.status).not.toBe("LIVE")
    }))

  it.scoped("GET /metrics answers the registry in the Prometheus text format, with the lease label", () =>
    Effect.gen(function*() {
      const memory = yield* MemoryBackend.make()
      const client = yield* Simba.make({ leaseDuration: "3 seconds" }).pipe(
        Effect.provideService(LeaseBackend.LeaseBackend, memory)
      )
      const election = yield* client.election("metrics-reporter")
      yield* advance("200 millis")
      yield* election.stop
      yield* Effect.forkScoped(client.partitionGroup("metrics-group", 3, () => Effect.never))
      yield* advance("1 second")
      const runtime = yield* Layer.toRuntime(Layer.succeed(Simba.Simba, client))
      const handler = HttpApp.toWebHandlerRuntime(runtime)(Effect.flatten(SimbaHttp.router))
      const response = yield* Effect.promise(() => handler(new Request("http://localhost/metrics")))
      expect(response.status).toBe(200)
      expect(response.headers.get("content-type")).toBe("text/plain; version=0.0.4; charset=utf-8")
      const families = parseExposition(yield* Effect.promise(() => response.text()))

      const terms = families.get("simba_terms_total")!
      expect(terms.type).toBe("counter")
      expect(terms.help).toBe("terms won, by lease")
      expect(valueOf(terms, "simba_terms_total", { lease: "metrics-reporter" })).toBe(1)
      // Partitions are labelled by their group: one series for the three partitions.
      expect(valueOf(terms, "simba_terms_total", { lease: "metrics-group" })).toBe(3)
      expect(terms.samples.some((s) => s.labels.lease?.startsWith("metrics-group."))).toBe(false)
      const leader = families.get("simba_leader_terms")!
      expect(leader.type).toBe("gauge")
      expect(valueOf(leader, "simba_leader_terms", { lease: "metrics-reporter" })).toBe(0)
      expect(valueOf(leader, "simba_leader_terms", { lease: "metrics-group" })).toBe(3)
      const revocations = families.get("simba_revocations_total")!
      expect(valueOf(revocations, "simba_revocations_total", { lease: "metrics-reporter", reason: "STOPPED" })).toBe(1)
      // The backend-call latency histogram, in seconds: cumulative buckets ending with +Inf = _count.
      const calls = families.get("simba_backend_call_duration_seconds")
      if (calls !== undefined) {
        expect(calls.type).toBe("histogram")
        expect(calls.samples.some((s) => "time_unit" in s.labels)).toBe(false)
        checkHistograms(calls, "simba_backend_call_duration_seconds")
      }
    }))

  it.effect("the text format: histograms, summaries, frequencies, escaping and HELP/TYPE lines", () =>
    Effect.gen(function*() {
      const histogram = Metric.histogram("lm_test_latency", MetricBoundaries.fromIterable([1, 5]), "latency\nin ms")
        .pipe(Metric.tagged("path", "a\"b\\c\nd"))
      yield* Metric.update(histogram, 0.5)
      yield* Metric.update(histogram, 3)
      yield* Metric.update(histogram, 7)
      const summary = Metric.summary({ name: "lm_test_summary", maxAge: "1 minute", maxSize: 10, error: 0, quantiles: [0.5] })
      yield* Metric.update(summary, 2)
      const frequency = Metric.frequency("lm_test_frequency")
      yield* Metric.update(frequency, "x")
      yield* Metric.update(frequency, "x")
      const families = parseExposition(yield* SimbaHttp.prometheusText)

      const h = families.get("lm_test_latency")!
      expect(h.type).toBe("histogram")
      expect(h.help).toBe("latency\\nin ms")
      const path = "a\"b\\c\nd"
      expect(valueOf(h, "lm_test_latency_bucket", { path, le: "1" })).toBe(1)
      expect(valueOf(h, "lm_test_latency_bucket", { path, le: "5" })).toBe(2)
      expect(valueOf(h, "lm_test_latency_bucket", { path, le: "+Inf" })).toBe(3)
      expect(valueOf(h, "lm_test_latency_sum", { path })).toBe(10.5)
      expect(valueOf(h, "lm_test_latency_count", { path })).toBe(3)
      checkHistograms(h, "lm_test_latency")
      const s = families.get("lm_test_summary")!
      expect(s.type).toBe("summary")
      expect(valueOf(s, "lm_test_summary", { quantile: "0.5" })).toBe(2)
      expect(valueOf(s, "lm_test_summary_count", {})).toBe(1)
      const f = families.get("lm_test_frequency")!
      expect(f.type).toBe("counter")
      expect(valueOf(f, "lm_test_frequency", { key: "x" })).toBe(2)
    }))

  it.scoped("the whole GET /metrics text follows the exposition format: HELP and TYPE per family, gauges, seconds", () =>
    Effect.gen(function*() {
      const memory = yield* MemoryBackend.make()
      // The Effect runtime's fiber metrics, Simba's, and an application's of every kind, awkward ones too.
      const fibers = yield* Effect.forkScoped(Effect.gen(function*() {
        const client = yield* Simba.make({ leaseDuration: "3 seconds" }).pipe(
          Effect.provideService(LeaseBackend.LeaseBackend, memory)
        )
        yield* client.election("exposition")
        yield* Effect.forkScoped(Effect.never)
        return client
      }).pipe(Effect.provide(RuntimeFlags.enableRuntimeMetrics)))
      yield* advance("500 millis")
      const client = yield* Fiber.join(fibers)
      const timer = Metric.timer("lx_request_duration", "request latency").pipe(Metric.tagged("route", "/a"))
      yield* Metric.update(timer, Duration.millis(3))
      yield* Metric.update(timer, Duration.seconds(2))
      yield* Metric.update(Metric.timer("lx_job_milliseconds"), Duration.millis(40))
      const updown = Metric.counter("lx_in_flight", { description: "requests in flight" })
      yield* Metric.update(updown, 2)
      yield* Metric.update(updown, -1)
      yield* Metric.update(Metric.counter("lx-bad.name", { incremental: true }).pipe(Metric.tagged("__x", "1"), Metric.tagged("a-b", "2")), 1)
      const clash = Metric.histogram("lx_sizes", MetricBoundaries.fromIterable([10]), "sizes").pipe(Metric.tagged("le", "mine"))
      yield* Metric.update(clash, 4)
      yield* Metric.update(Metric.gauge("lx_temperature"), -3.5)

      const runtime = yield* Layer.toRuntime(Layer.succeed(Simba.Simba, client))
      const handler = HttpApp.toWebHandlerRuntime(runtime)(Effect.flatten(SimbaHttp.router))
      const text = yield* Effect.promise(() => handler(new Request("http://localhost/metrics")).then((r) => r.text()))
      const families = parseExposition(text)
      for (const [name, family] of families) {
        expect(family.help, `HELP of ${name}`).toBeDefined()
        if (family.type === "histogram") checkHistograms(family, name)
        if (family.type === "counter") for (const s of family.samples) expect(s.value, `${s.name} negative`).toBeGreaterThanOrEqual(0)
        for (const s of family.samples) expect(s.labels, `${s.name} has a time_unit label`).not.toHaveProperty("time_unit")
      }
      expect(text).not.toMatch(/_duration(_bucket|_sum|_count)?\{/)

      // Effect's fiber count goes up and down: a gauge; its lifetimes are in seconds.
      expect(families.get("effect_fiber_active")?.type).toBe("gauge")
      expect(families.get("effect_fiber_started")?.type).toBe("counter")
      expect(families.get("effect_fiber_lifetimes_seconds")?.type).toBe("histogram")
      expect(families.has("effect_fiber_lifetimes")).toBe(false)
      // Simba's own.
      expect(families.get("simba_leader_terms")).toMatchObject({ type: "gauge", help: "terms held now, by lease" })
      expect(families.get("simba_backend_call_duration_seconds")?.type).toBe("histogram")
      // A timer: seconds, its millisecond boundaries divided by 1000 (Metric.timer's start at 0.5 ms).
      const request = families.get("lx_request_duration_seconds")!
      expect(request).toMatchObject({ type: "histogram", help: "request latency (seconds)" })
      expect(valueOf(request, "lx_request_duration_seconds_bucket", { route: "/a", le: "0.0005" })).toBe(0)
      expect(valueOf(request, "lx_request_duration_seconds_bucket", { route: "/a", le: "0.004" })).toBe(1)
      expect(valueOf(request, "lx_request_duration_seconds_bucket", { route: "/a", le: "2.048" })).toBe(2)
      expect(valueOf(request, "lx_request_duration_seconds_sum", { route: "/a" })).toBeCloseTo(2.003, 9)
      expect(families.get("lx_job_seconds")?.type).toBe("histogram")
      expect(families.has("lx_job_milliseconds_seconds")).toBe(false)
      // A plain (not incremental) counter may go down: a gauge. Described or not, every family has HELP.
      expect(families.get("lx_in_flight")).toMatchObject({ type: "gauge", help: "requests in flight" })
      expect(valueOf(families.get("lx_in_flight")!, "lx_in_flight", {})).toBe(1)
      expect(families.get("lx_temperature")).toMatchObject({ type: "gauge", help: "metric lx_temperature" })
      // Names and label names made valid; a user's `le` does not clash with the bucket's.
      const bad = families.get("lx_bad_name")!
      expect(bad.type).toBe("counter")
      expect(valueOf(bad, "lx_bad_name", { _x: "1", a_b: "2" })).toBe(1)
      expect(valueOf(families.get("lx_sizes")!, "lx_sizes_bucket", { tag_le: "mine", le: "10" })).toBe(1)
    }))
})

interface Sample {
  readonly name: string
  readonly labels: Readonly<Record<string, string>>
  readonly value: number
}

interface Family {
  readonly type: string
  help: string | undefined
  readonly samples: Array<Sample>
}

/**
 * A strict reader of the text format (0.0.4). Every line is a `# HELP` or a `# TYPE` (each at most
 * once per family, before its samples) or a sample `name{label="value",...} value`: the name valid
 * (`[a-zA-Z_:][a-zA-Z0-9_:]*`) and of the family typed last (with `_bucket`/`_sum`/`_count` for a
 * histogram, `_sum`/`_count` for a summary), so a family's lines form one group; label names valid,
 * not reserved (`__`), not repeated; label values escaped (only `\\`, `\"`, `\n`); the value a
 * float; no series twice. Fails the test on anything else.
 */
const parseExposition = (text: string): Map<string, Family> => {
  expect(text.endsWith("\n")).toBe(true)
  const families = new Map<string, Family>()
  let current: string | undefined
  const helps = new Map<string, string>()
  const seen = new Set<string>()
  const metricName = "[a-zA-Z_:][a-zA-Z0-9_:]*"
  for (const line of text.slice(0, -1).split("\n")) {
    const help = new RegExp(`^# HELP (${metricName}) (.*)$`).exec(line)
    if (help !== null) {
      expect(helps.has(help[1]!) || families.has(help[1]!), `HELP ${help[1]} twice, or after its TYPE`).toBe(false)
      expect(help[2], `bad escape in ${line}`).toMatch(/^(?:[^\\\n]|\\[\\n])*$/)
      helps.set(help[1]!, help[2]!)
      continue
    }
    const type = new RegExp(`^# TYPE (${metricName}) (counter|gauge|histogram|summary|untyped)$`).exec(line)
    if (type !== null) {
      expect(families.has(type[1]!), `TYPE ${type[1]} twice`).toBe(false)
      families.set(type[1]!, { type: type[2]!, help: helps.get(type[1]!), samples: [] })
      current = type[1]
      continue
    }
    const sample = new RegExp(`^(${metricName})(?:\\{(.*)\\})? (\\S+)$`).exec(line)
    expect(sample, `not a valid exposition line: ${line}`).not.toBeNull()
    const [, name, rawLabels, rawValue] = sample!
    expect(current, `sample before any TYPE: ${line}`).toBeDefined()
    const family = families.get(current!)!
    const suffixes = family.type === "histogram" ? ["_bucket", "_sum", "_count"] : family.type === "summary" ? ["", "_sum", "_count"] : [""]
    expect(suffixes.map((suffix) => `${current}${suffix}`), `sample ${name} outside its family ${current}`).toContain(name)
    const labels: Record<string, string> = {}
    if (rawLabels !== undefined) {
      const labelPattern = /([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\\n]|\\[\\"n])*)"(,|$)/y
      let at = 0
      while (at < rawLabels.length) {
        labelPattern.lastIndex = at
        const label = labelPattern.exec(rawLabels)
        expect(label, `bad labels in ${line}`).not.toBeNull()
        const labelName = label![1]!
        expect(labelName.startsWith("__"), `reserved label name in ${line}`).toBe(false)
        expect(labelName in labels, `label ${labelName} twice in ${line}`).toBe(false)
        labels[labelName] = label![2]!.replace(/\\(.)/g, (_, c: string) => c === "n" ? "\n" : c)
        at = labelPattern.lastIndex
      }
    }
    const value = rawValue === "+Inf" ? Infinity : rawValue === "-Inf" ? -Infinity : Number(rawValue)
    expect(rawValue === "NaN" || !Number.isNaN(value), `bad value in ${line}`).toBe(true)
    if (family.type === "histogram") expect("le" in labels, `le on ${line}`).toBe(name === `${current}_bucket`)
    if (family.type === "summary") expect("quantile" in labels, `quantile on ${line}`).toBe(name === current)
    const series = `${name}${JSON.stringify(Object.entries(labels).sort())}`
    expect(seen.has(series), `series twice: ${line}`).toBe(false)
    seen.add(series)
    family.samples.push({ name: name!, labels, value })
  }
  return families
}

const valueOf = (family: Family, name: string, labels: Record<string, string>): number | undefined =>
  family.samples.find((s) =>
    s.name === name && Object.keys(s.labels).length === Object.keys(labels).length &&
    Object.entries(labels).every(([k, v]) => s.labels[k] === v)
  )?.value

/**
 * Every series of a histogram: `le` a float, rising, the last one `+Inf`; bucket counts
 * non-decreasing; the `+Inf` bucket equal to `_count`; a `_sum`.
 */
const checkHistograms = (family: Family, name: string): void => {
  const series = new Map<string, Array<Sample>>()
  for (const s of family.samples.filter((s) => s.name === `${name}_bucket`)) {
    const { le: _le, ...rest } = s.labels
    const key = JSON.stringify(rest)
    series.set(key, [...(series.get(key) ?? []), s])
  }
  expect(series.size).toBeGreaterThan(0)
  for (const [key, buckets] of series) {
    const les = buckets.map((b) => b.labels.le === "+Inf" ? Infinity : Number(b.labels.le))
    for (const le of les) expect(Number.isNaN(le), `le of ${name} ${key}`).toBe(false)
    for (let i = 1; i < buckets.length; i++) {
      expect(les[i]!, `le of ${name} ${key} rising`).toBeGreaterThan(les[i - 1]!)
      expect(buckets[i]!.value, `buckets of ${name} ${key} cumulative`).toBeGreaterThanOrEqual(buckets[i - 1]!.value)
    }
    expect(buckets.at(-1)!.labels.le).toBe("+Inf")
    expect(valueOf(family, `${name}_count`, JSON.parse(key))).toBe(buckets.at(-1)!.value)
    expect(valueOf(family, `${name}_sum`, JSON.parse(key)), `_sum of ${name} ${key}`).toBeDefined()
  }
}

describe("lease labels", () => {
  it("partitions are labelled by group; past maxLeaseLabels distinct labels, new names share 'other'", () => {
    expect(Metrics.leaseLabel("orders.7", "orders")).toBe("orders")
    for (let i = 0; i < Metrics.maxLeaseLabels + 20; i++) Metrics.forLease(`cap-${i}`, undefined)
    expect(Metrics.leaseLabel("cap-0", undefined)).toBe("cap-0")
    expect(Metrics.leaseLabel(`cap-${Metrics.maxLeaseLabels + 19}`, undefined)).toBe(Metrics.otherLease)
    expect(Metrics.forLease("yet-another", undefined)).toBe(Metrics.forLease("and-another", undefined))
  })
})
