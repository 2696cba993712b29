/**
 * `npm run bench`: Simba beside `@sesamecare-oss/redlock` and `redis-semaphore` (`Mutex`) on the
 * Redis at 127.0.0.1:6379 (`BENCH_REDIS_URL` to point elsewhere), then the engine's own figures.
 * Prints a table and writes `bench/results.json`: one row per metric,
 * `{ bench, metric, unit, simba, redlock, redisSemaphore, floor }`, `null` where one does not apply.
 *
 * Sections (see `redis.ts` for the settings and `util.ts` for how commands are counted):
 * - floor: PING, EVAL of `return 1`, and the least a push handover can cost on this machine;
 * - uncontended: acquire + release on a fresh name, 2,000 sequential runs after 4,000 warm-up runs
 *   (steady state, see `WARMUP` in `redis.ts`), and the server's own time in each lock's commands
 *   (`INFO commandstats`); for Simba also the LeaseBackend alone and the two
 *   floors under it (`floors/`: its scripts through bare ioredis, the prescribed shell shape without
 *   the engine); then what an idle Simba client of the same prefix in another process spends
 *   meanwhile (`floors/bystander.ts`);
 * - contended: 8 contenders (8 clients) on one name, each taking the lock, ~1 ms of work
 *   (`setTimeout(1)`), releasing, for 0.5 s of warm-up and a 10 s window; then the same on the two
 *   floors (Simba's scripts with fair hand-off through bare ioredis; the prescribed shell shape on
 *   the LeaseBackend);
 * - renew: one client holding 1,000 leases, 10 s window;
 * - renew10k: one client holding 10,000 leases (locks, then a partition group of 10,000 partitions),
 *   on the single node and on the Cluster: renewal round trip and CPU per renewal, beside the CPU of a
 *   bare client renewing as often (a process of its own); then the LeaseBackend alone holding 10,000
 *   leases (see `renew10k.ts`);
 * - handover: a holder releases while one contender waits (50 times, after 5 warm-up); Simba also
 *   with `withLock` on both sides (body end → body start), and the same two floors;
 * - cached: lock caching (`keep`): one client takes one name 20,000 times (the peers take and release
 *   it 2,000 times), after 4,000 warm-up ones, on Redis and, for Simba, in memory; a second client
 *   asks for a cached lease (ask → its body starts) and waits while the holder's body runs (body ends
 *   → its body starts), see `cached.ts`;
 * - engine: `Engine.step` events per second (each case in a fresh process); heap per idle election; heap kept
 *   per `withLock` (a leak check).
 *
 * Keys and connection names start with `bench-<random>`; the keys are deleted at the end.
 *
 * `npm run bench` builds the package and runs this file with `--import ./bench/built.mjs`, so every
 * figure is of `dist/`, the code users install (see `built.mjs`; `npx tsx bench/run.ts` measures
 * `src/` through tsx instead, a little slower and ~1 KB heavier per election).
 *
 * `--only uncontended` (floor + uncontended) or `--only contended` (floor + uncontended, whose command
 * costs the contended section needs, + contended), `--only handover` (floor + handover) or `--only renew10k`
 * (that section alone; its rows replace that section's rows in bench/results.json, for `npm run
 * bench:report`) or `--only engine` (that section alone, no Redis needed): prints those rows and stops,
 * writing no other results. `--help` prints this usage and stops.
 *
 * A full run ends with `report.ts`, which records the issues' targets of the run in
 * `bench/history.json` (`targets.ts`: their spread over the last runs) and regenerates
 * docs/performance.md from the results files.
 * The investigation harnesses (the floors, the idle client, the runtime-operation count) are in
 * `floors/`.
 */
import { existsSync, readFileSync, writeFileSync } from "node:fs"
import { loadavg } from "node:os"
import { fileURLToPath } from "node:url"
import * as Cached from "./cached.js"
import * as Holds from "./holds.js"
import * as EngineBench from "./engine.js"
import * as Bystander from "./floors/bystander.js"
import * as Floors from "./floors/redis.js"
import * as R from "./redis.js"
import * as R10k from "./renew10k.js"
import { main as writeReport, targetLine } from "./report.js"
import { targets } from "./targets.js"
import {
  deleteKeys,
  installRoundTripCounter,
  median,
  newRedis,
  quit,
  randomHex,
  redisUrl,
  serverCommands,
  serverDelta,
  sleep
} from "./util.js"
import type { RedisRow } from "./rows.js"

type Row = RedisRow

const rows: Array<Row> = []
const row = (
  bench: string,
  metric: string,
  unit: string,
  values: { simba?: number | null; redlock?: number | null; redisSemaphore?: number | null; floor?: number | null }
) => {
  const clean = (x: number | null | undefined) => (x === undefined || x === null || !Number.isFinite(x) ? null : x)
  rows.push({
    bench,
    metric,
    unit,
    simba: clean(values.simba),
    redlock: clean(values.redlock),
    redisSemaphore: clean(values.redisSemaphore),
    floor: clean(values.floor)
  })
}

const log = (line: string) => process.stderr.write(`bench: ${line}\n`)
const us = (ms: number) => ms * 1000
const round = (x: number | null): string => {
  if (x === null) return "—"
  const a = Math.abs(x)
  if (a >= 1000) return Math.round(x).toLocaleString("en-US")
  if (a >= 100) return x.toFixed(0)
  if (a >= 10) return x.toFixed(1)
  if (a >= 1) return x.toFixed(2)
  return x.toFixed(3)
}

const printTable = () => {
  const header = ["bench", "metric", "unit", "simba", "redlock", "redis-semaphore", "floor"]
  const body = rows.map((r) => [r.bench, r.metric, r.unit, round(r.simba), round(r.redlock), round(r.redisSemaphore), round(r.floor)])
  const widths = header.map((h, i) => Math.max(h.length, ...body.map((b) => b[i]!.length)))
  const line = (cells: ReadonlyArray<string>) =>
    cells.map((c, i) => (i >= 3 ? c.padStart(widths[i]!) : c.padEnd(widths[i]!))).join("  ")
  console.log(line(header))
  console.log(widths.map((w) => "-".repeat(w)).join("  "))
  for (const b of body) console.log(line(b))
}

const usage = "bench/run.ts [--only uncontended | contended | handover | renew10k | cached | holds | engine] [--help]"
if (process.argv.includes("--help")) {
  console.log(usage)
  console.log("Without --only: every section, then bench/results*.json and docs/performance.md are written.")
  process.exit(0)
}

const onlyAt = process.argv.indexOf("--only")
const only = onlyAt === -1 ? undefined : process.argv[onlyAt + 1]
if (
  only !== undefined && only !== "uncontended" && only !== "contended" && only !== "handover" && only !== "renew10k" &&
  only !== "cached" && only !== "holds" && only !== "engine"
) {
  throw new Error(usage)
}

/** `Engine.step` events/s, heap kept per `withLock`, heap per idle election: no Redis needed. */
const engineSection = async () => {
  // The machine's speed drifts within minutes: the two cases alternate, three times each (every run in a
  // process of its own); the ratio is the median of the three pairs' ratios.
  log("engine: events/s (10 and 10,000 elections, alternating, 3 pairs)")
  const pairs: Array<{ readonly few: number; readonly many: number }> = []
  let events = 0
  for (let i = 0; i < 3; i++) {
    const few = await EngineBench.eventsPerSecondAlone(10, 30_000)
    const many = await EngineBench.eventsPerSecondAlone(10_000, 30_000)
    pairs.push({ few: few.eventsPerSecond, many: many.eventsPerSecond })
    events = few.events
  }
  row("engine", "Engine.step events/s, 10 elections in the state (median of 3)", "1/s", {
    simba: median(pairs.map((pair) => pair.few))
  })
  row("engine", "Engine.step events/s, 10,000 elections in the state (median of 3)", "1/s", {
    simba: median(pairs.map((pair) => pair.many))
  })
  row("engine", "Engine.step events/s, 10,000 elections / 10, median of 3 alternating pairs (target >= 0.5)", "ratio", {
    simba: median(pairs.map((pair) => pair.many / pair.few))
  })
  log("engine: heap kept per withLock (40,000 calls)")
  row("engine", "heap kept per withLock by a long-lived client (memory backend, growth over 30,000 calls)", "bytes", {
    simba: await EngineBench.heapPerWithLock()
  })
  log("engine: heap per idle election")
  const heap = await EngineBench.heapPerElection(1000)
  row("engine", `heap per idle election, leader (memory backend, ${heap.elections} elections)`, "bytes", {
    simba: heap.bytesPerLeader
  })
  row("engine", `heap per idle election, waiting candidate (memory backend, ${heap.elections} elections)`, "bytes", {
    simba: heap.bytesPerCandidate
  })
  return { events }
}

const main = async () => {
  if (only === "engine") {
    await engineSection()
    log(`load average ${loadavg().map((x) => x.toFixed(2)).join(" ")}`)
    return printTable()
  }
  installRoundTripCounter()
  const prefix = `bench-${randomHex(4)}`
  const monitor = await newRedis(`${prefix}-monitor`)
  const ctx: R.Context = { prefix, monitor, log }
  const started = Date.now()
  const notes: Array<string> = []
  const version = /redis_version:(\S+)/.exec(await monitor.info("server"))?.[1] ?? "?"
  log(`Redis ${version} at ${redisUrl}, Node ${process.version}, key prefix ${prefix}, load average ${loadavg().map((x) => x.toFixed(2)).join(" ")}`)

  /** Commands/s other clients make the server run while we do nothing (this bench's counts include them). */
  const background = async () => {
    const before = await serverCommands(monitor)
    await sleep(1000)
    return serverDelta(before, await serverCommands(monitor))
  }

  /**
   * Runs a section with a server-counted window; if other clients ran scripts on the server during
   * it (their commands would be counted as ours), runs it once more, and flags it if that happens again.
   */
  const isolated = async <A extends { readonly foreignScripts: number }>(label: string, run: () => Promise<A>): Promise<A> => {
    let result = await run()
    if (result.foreignScripts > 0) {
      log(`${label}: other clients ran ${result.foreignScripts} scripts on the server during the window; measuring again`)
      result = await run()
    }
    if (result.foreignScripts > 0) {
      notes.push(`${label}: server-side counts include ${result.foreignScripts} scripts run by other clients (client-side round trips do not)`)
    }
    return result
  }

  /** One client holding 10,000 leases: renewal round trip and CPU per renewal, per mode and shape. */
  const renew10k = async () => {
    // `RENEW10K_CASES=floor,node:locks,cluster:partitions,node:backend` runs only those cases.
    const cases = process.env["RENEW10K_CASES"]?.split(",")
    if (cases === undefined || cases.includes("floor")) {
      log("renew10k: floor, in a process of its own (measuring only, then a bare ioredis PING per renew interval: 2 x 20 s)")
      const f = await R10k.renewFloorAlone()
      log(`renew10k floor: measuring only ${f.measuringOnlyMs.toFixed(2)} ms, one PING per interval ${f.pingPerIntervalMs.toFixed(2)} ms (median 1 s slices)`)
      row("renew10k", "floor: process CPU of a process that only measures (one timer per second), median 1 s slice", "ms", { floor: f.measuringOnlyMs })
      row("renew10k", "floor: process CPU with a bare ioredis client sending one PING per renew interval (1 s), median 1 s slice", "ms", { floor: f.pingPerIntervalMs })
      for (const leases of [10, 10_000]) {
        log(`renew10k: an idle client holding ${leases} locks, in a process of its own measured as the floor's (~40 s)`)
        const idle = await R10k.idleClientAlone(leases, prefix)
        log(
          `renew10k idle client, ${leases} locks: ${idle.perRenewalMs.toFixed(2)} ms per renewal (measuring only ` +
            `${idle.measuringOnlyMs.toFixed(2)} ms; bare PING ${f.pingPerIntervalMs.toFixed(2)} ms: ` +
            `${(idle.perRenewalMs / f.pingPerIntervalMs).toFixed(2)}x), ${idle.heldAtEnd} held at the end`
        )
        if (idle.heldAtEnd < leases) notes.push(`renew10k idle client: only ${idle.heldAtEnd} of ${leases} locks held at the end`)
        row(
          "renew10k",
          `idle client holding ${leases.toLocaleString("en-US")} locks, a process of its own: process CPU per renewal, median 1 s slice (floor: bare PING client)`,
          "ms",
          { simba: idle.perRenewalMs, floor: f.pingPerIntervalMs }
        )
      }
    }
    for (const mode of ["node", "cluster"] as const) {
      for (const shape of ["locks", "partitions"] as const) {
        if (cases !== undefined && !cases.includes(`${mode}:${shape}`)) continue
        log(`renew10k: ${mode}, ${shape}, in a process of its own (acquire, then a 20 s window)`)
        const r = await R10k.renew10kAlone(prefix, mode, shape)
        const { p50, p99 } = R10k.summary(r)
        log(
          `renew10k ${mode} ${shape}: ${r.renewals.length} renewals, p50 ${p50.toFixed(2)} ms, p99 ${p99.toFixed(2)} ms, ` +
            `CPU ${r.cpuPerRenewalMs.toFixed(2)} ms per renewal (median 1 s slice; mean ${r.cpuMsPerSecond.toFixed(1)} ms/s, largest slice ${r.cpuLargestSliceMs.toFixed(0)} ms), ` +
            `${r.roundTripsPerRenewal.toFixed(1)} round trips per renewal, ${r.heldAtEnd} held at the end`
        )
        if (r.heldAtEnd < R10k.LEASES) {
          notes.push(
            `renew10k ${mode} ${shape}: only ${r.heldAtEnd} of ${R10k.LEASES} leases held at the end (the session ended: ` +
              `see the log); its figures are not those of 10,000 leases`
          )
        }
        const what = `${mode === "node" ? "single node" : "Cluster"}, 10,000 ${shape === "locks" ? "locks" : "partitions of one group"}`
        row("renew10k", `keepAlive round trip, median (${what}, ${r.renewals.length} renewals)`, "ms", { simba: p50 })
        row("renew10k", `keepAlive round trip, p99 (${what})`, "ms", { simba: p99 })
        row("renew10k", `process CPU per renewal, idle elections included, median 1 s slice (${what})`, "ms", { simba: r.cpuPerRenewalMs })
        row("renew10k", `process CPU while holding, mean over the window, V8 heap reduction included (${what})`, "ms/s", { simba: r.cpuMsPerSecond })
        row("renew10k", `process CPU, largest 1 s slice of the window (${what})`, "ms", { simba: r.cpuLargestSliceMs })
        row("renew10k", `process CPU per second before the client existed, median 1 s slice (idle baseline) (${what})`, "ms/s", { simba: r.idleBaselineMsPerSecond })
        row("renew10k", `Redis round trips per renewal (${what})`, "round trips", { simba: r.roundTripsPerRenewal })
        row("renew10k", `leases held at the end of the window (${what})`, "leases", { simba: r.heldAtEnd })
        row("renew10k", `seconds until all 10,000 were held (${what})`, "s", { simba: r.acquireSeconds })
      }
    }
    for (const mode of ["node", "cluster"] as const) {
      if (cases !== undefined && !cases.includes(`${mode}:backend`)) continue
      log(`renew10k: ${mode}, LeaseBackend alone, in a process of its own`)
      const r = await R10k.renew10kBackendAlone(prefix, mode)
      const what = `${mode === "node" ? "single node" : "Cluster"}, LeaseBackend alone, 10,000 leases`
      log(
        `renew10k ${mode} backend: unchanged p50 ${R.summary.median(r.unchanged).toFixed(2)} ms, CPU ${r.unchangedCpuMs.toFixed(2)} ms; ` +
          `listed p50 ${R.summary.median(r.listed).toFixed(2)} ms, CPU ${r.listedCpuMs.toFixed(2)} ms`
      )
      row("renew10k", `keepAlive naming the known version, median of 20 (${what})`, "ms", { simba: R.summary.median(r.unchanged) })
      row("renew10k", `process CPU per keepAlive naming the known version (${what})`, "ms", { simba: r.unchangedCpuMs })
      row("renew10k", `keepAlive listing every lease, median of 5 (${what})`, "ms", { simba: R.summary.median(r.listed) })
      row("renew10k", `process CPU per keepAlive listing every lease (${what})`, "ms", { simba: r.listedCpuMs })
      row("renew10k", `Redis round trips per keepAlive listing every lease (${what})`, "round trips", { simba: r.listedRoundTrips })
    }
    log(`renew10k: deleted ${await R10k.deleteClusterKeys(prefix)} cluster keys`)
  }

  /** Semaphores and read-write locks beside redis-semaphore's `Semaphore` and `MultiSemaphore`. */
  const holdsSection = async () => {
    log("holds: uncontended, simba withPermits (1 of 3) and withLock, Semaphore, MultiSemaphore")
    const u = await Holds.uncontendedSimba(ctx)
    const uSem = await Holds.uncontendedPeer(ctx, "semaphore")
    const uMulti = await Holds.uncontendedPeer(ctx, "multiSemaphore")
    const median = (r: Holds.UncontendedHolds) => us(R.summary.median(r.samples))
    row("holds", "uncontended acquire + release of 1 of 3 permits, median of 2,000 (peer: Semaphore)", "µs", {
      simba: median(u.permits),
      redisSemaphore: median(uSem)
    })
    row("holds", "uncontended acquire + release of 1 of 3 permits, median of 2,000 (peer: MultiSemaphore, 1 permit)", "µs", {
      redisSemaphore: median(uMulti)
    })
    row("holds", "uncontended withLock on the same client and run, median of 2,000 (for the ratio)", "µs", { simba: median(u.lock) })
    row("holds", "process CPU per uncontended acquire + release of a permit (peer: Semaphore)", "µs", {
      simba: us(u.permits.cpuPerPair),
      redisSemaphore: us(uSem.cpuPerPair)
    })
    row("holds", "process CPU per uncontended acquire + release of a permit (peer: MultiSemaphore)", "µs", { redisSemaphore: us(uMulti.cpuPerPair) })
    row("holds", "round trips per uncontended acquire + release of a permit (peer: Semaphore)", "round trips", {
      simba: u.permits.roundTripsPerPair,
      redisSemaphore: uSem.roundTripsPerPair
    })
    log("holds: contended, 8 contenders on 3 permits (simba, Semaphore, MultiSemaphore)")
    const cSimba = await Holds.contendedSimba(ctx)
    const cSem = await Holds.contendedPeer(ctx, "semaphore")
    const cMulti = await Holds.contendedPeer(ctx, "multiSemaphore")
    for (const [label, peer] of [["Semaphore", cSem], ["MultiSemaphore", cMulti]] as const) {
      const both = (f: (r: R.ContendedResult) => number) => ({ simba: f(cSimba), redisSemaphore: f(peer) })
      row("holds", `8 contenders on 3 permits, sections/s (peer: ${label})`, "1/s", both((r) => r.sectionsPerSecond))
      row("holds", `8 contenders on 3 permits, fairness (Jain) (peer: ${label})`, "index", both((r) => r.fairness))
      row("holds", `8 contenders on 3 permits, longest wait (peer: ${label})`, "ms", both((r) => r.longestWaitMs))
      row("holds", `8 contenders on 3 permits, waiter round trips per section (peer: ${label})`, "round trips", both((r) => r.waiterRoundTripsPerSecond / r.sectionsPerSecond))
    }
    log("holds: read-write lock, 6 readers and 2 writers")
    const rw = await Holds.readWrite(ctx)
    row("holds", "read-write lock, 6 readers + 2 writers: reads/s", "1/s", { simba: rw.readsPerSecond })
    row("holds", "read-write lock, 6 readers + 2 writers: writes/s", "1/s", { simba: rw.writesPerSecond })
    row("holds", "read-write lock, 6 readers + 2 writers: a writer's longest wait", "ms", { simba: rw.longestWriterWaitMs })
    row("holds", "read-write lock, 6 readers + 2 writers: a writer's median wait", "ms", { simba: rw.medianWriterWaitMs })
    log(
      `holds: uncontended simba ${median(u.permits).toFixed(0)} µs (withLock ${median(u.lock).toFixed(0)}), Semaphore ` +
        `${median(uSem).toFixed(0)}, MultiSemaphore ${median(uMulti).toFixed(0)}; contended simba ${cSimba.sectionsPerSecond.toFixed(0)}/s ` +
        `fairness ${cSimba.fairness.toFixed(3)} longest ${cSimba.longestWaitMs.toFixed(0)} ms, Semaphore ${cSem.sectionsPerSecond.toFixed(0)}/s ` +
        `${cSem.fairness.toFixed(3)} ${cSem.longestWaitMs.toFixed(0)} ms, MultiSemaphore ${cMulti.sectionsPerSecond.toFixed(0)}/s ` +
        `${cMulti.fairness.toFixed(3)} ${cMulti.longestWaitMs.toFixed(0)} ms; rw ${rw.readsPerSecond.toFixed(0)} reads/s ` +
        `${rw.writesPerSecond.toFixed(0)} writes/s, writer longest ${rw.longestWriterWaitMs.toFixed(1)} ms`
    )
  }

  /** Lock caching: one name again and again, and a second client asking for a cached lease. */
  const cachedSection = async () => {
    log("cached: simba with keep, one name again and again (Redis, then memory)")
    const kSimba = await Cached.sameNameSimba(ctx)
    const kMemory = await Cached.sameNameMemory()
    log("cached: redlock and redis-semaphore taking and releasing one name again and again")
    const kRedlock = await Cached.sameNamePeer(ctx, "redlock")
    const kMutex = await Cached.sameNamePeer(ctx, "redisSemaphore")
    const k = (f: (r: Cached.SameNameResult) => number | undefined) => ({
      simba: f(kSimba) ?? null,
      redlock: f(kRedlock) ?? null,
      redisSemaphore: f(kMutex) ?? null
    })
    row("cached", `keep: one name taken again and again by one client, median of ${Cached.CACHED_BODIES.toLocaleString("en-US")} bodies (the peers: ${Cached.BODIES.toLocaleString("en-US")})`, "µs", k((r) => us(R.summary.median(r.samples))))
    row("cached", "keep: one name taken again and again by one client, p99", "µs", k((r) => us(R.summary.p99(r.samples))))
    row("cached", "keep: process CPU time per body", "µs", k((r) => us(r.cpuPerBody)))
    row("cached", "keep: round trips per body (client count, renewals left out)", "round trips", k((r) => r.roundTripsPerBody))
    row("cached", `keep on the in-memory store: one name taken again and again, median of ${Cached.CACHED_BODIES.toLocaleString("en-US")} bodies`, "µs", {
      simba: us(R.summary.median(kMemory.samples))
    })
    row("cached", "keep on the in-memory store: process CPU time per body", "µs", { simba: us(kMemory.cpuPerBody) })
    log("cached: a second client asks for a cached lease")
    const asked = await Cached.askedSimba(ctx)
    row("cached", "keep: a second client asks for a lease the first caches (no body runs): ask → its body starts, median of 50", "ms", {
      simba: R.summary.median(asked.askToBody)
    })
    row("cached", "keep: the holder's body ends while a second client waits → the waiter's body starts, median of 50", "ms", {
      simba: R.summary.median(asked.bodyToBody)
    })
    log(
      `cached: simba ${us(R.summary.median(kSimba.samples)).toFixed(1)} µs/body (${us(kSimba.cpuPerBody).toFixed(1)} µs CPU, ` +
        `${kSimba.roundTripsPerBody?.toFixed(4)} round trips), redlock ${us(R.summary.median(kRedlock.samples)).toFixed(1)} µs ` +
        `(${us(kRedlock.cpuPerBody).toFixed(1)} µs CPU), Mutex ${us(R.summary.median(kMutex.samples)).toFixed(1)} µs ` +
        `(${us(kMutex.cpuPerBody).toFixed(1)} µs CPU); memory ${us(R.summary.median(kMemory.samples)).toFixed(1)} µs; ` +
        `asked ${R.summary.median(asked.askToBody).toFixed(2)} ms, body → body ${R.summary.median(asked.bodyToBody).toFixed(2)} ms`
    )
    // Its targets (issue 28), judged from its rows as at the end of a full run.
    for (const target of targets.filter((t) => t.label.startsWith("Redis, keep:"))) {
      log(`cached target ${targetLine(target, target.measure({ redis: rows, sql: [], zk: [] }))}`)
    }
  }

  try {
    if (only === "renew10k" || only === "cached" || only === "holds") {
      await (only === "renew10k" ? renew10k() : only === "cached" ? cachedSection() : holdsSection())
      log(`load average ${loadavg().map((x) => x.toFixed(2)).join(" ")}`)
      // The section's rows replace its rows of the last full run in results.json, the others kept.
      const out = fileURLToPath(new URL("./results.json", import.meta.url))
      const kept = existsSync(out)
        ? (JSON.parse(readFileSync(out, "utf8")) as ReadonlyArray<Row>).filter((r) => r.bench !== only)
        : []
      writeFileSync(out, `${JSON.stringify([...kept, ...rows], null, 2)}\n`)
      printTable()
      for (const note of notes) console.log(`  ${note}`)
      return
    }
    const backgroundBefore = await background()
    log(`background traffic from other clients: ${backgroundBefore} commands/s`)

    // ---- floor ----
    log("floor")
    const floor = await R.floor(ctx)
    const evalMedian = R.summary.median(floor.eval)
    row("floor", "PING round trip, median", "µs", { floor: us(R.summary.median(floor.ping)) })
    row("floor", "PING round trip, p99", "µs", { floor: us(R.summary.p99(floor.ping)) })
    row("floor", "EVAL `return 1`, median", "µs", { floor: us(evalMedian) })
    row("floor", "EVAL `return 1`, p99", "µs", { floor: us(R.summary.p99(floor.eval)) })
    row("floor", "push handover (EVAL that PUBLISHes → subscriber → EVAL), median", "ms", {
      floor: R.summary.median(floor.pushHandover)
    })
    row("floor", "push handover (EVAL that PUBLISHes → subscriber → EVAL), p90", "ms", {
      floor: R.summary.p90(floor.pushHandover)
    })
    row("floor", "push handover, each after the hand-over's 10–40 ms idle, median of 50", "ms", {
      floor: R.summary.median(floor.pushHandoverAfterIdle)
    })

    // ---- handover ---- (a function: `--only handover` runs it right after the floor)
    const handoverSection = async () => {
      log("handover: simba")
      const hSimba = await R.handoverSimba(ctx)
      const handover: Record<R.Tuning, Record<R.PeerKind, R.HandoverResult>> = {} as never
      for (const tuning of ["defaults", "tuned"] as const) {
        handover[tuning] = {} as never
        for (const kind of ["redlock", "redisSemaphore"] as const) {
          log(`handover: ${kind} ${tuning}`)
          handover[tuning][kind] = await R.handoverPeer(ctx, kind, tuning)
        }
      }
      for (const tuning of ["defaults", "tuned"] as const) {
        const peers = handover[tuning]
        const suffix = tuning === "defaults" ? " (peers at defaults)" : " (peers tuned)"
        const h = (f: (r: R.HandoverResult) => number) => ({
          simba: f(hSimba),
          redlock: f(peers.redlock),
          redisSemaphore: f(peers.redisSemaphore)
        })
        row("handover", `release → waiter holds, median of 50${suffix} (floor: push handover after the same idle)`, "ms", {
          ...h((r) => R.summary.median(r.samples)),
          floor: R.summary.median(floor.pushHandoverAfterIdle)
        })
        row("handover", `release → waiter holds, p90 of 50${suffix} (floor: push handover after the same idle)`, "ms", {
          ...h((r) => R.summary.p90(r.samples)),
          floor: R.summary.p90(floor.pushHandoverAfterIdle)
        })
        row("handover", `waiter round trips/s while waiting${suffix}`, "1/s", h((r) => r.waiterRoundTripsPerSecond))
        row("handover", `waiter round trips per handover (waits of 10–40 ms)${suffix}`, "round trips", h((r) => r.waiterRoundTripsPerHandover))
      }
      row("handover", "Simba: release → its hand-off message heard by a plain subscriber (release ran in Redis), median", "ms", {
        simba: R.summary.median(hSimba.releasedInRedis ?? [])
      })
      row("handover", "Simba withLock both sides: holder's body ends → waiter's body starts, median of 50 (as the shell-shape floor)", "ms", {
        simba: R.summary.median(hSimba.withLockBodies ?? []),
        floor: R.summary.median(floor.pushHandoverAfterIdle)
      })
      log("handover: floors (Simba's scripts through bare ioredis; the prescribed shell shape on the LeaseBackend)")
      const hFloors = await Floors.handoverFloors(ctx)
      row("handover", "floor: Simba's scripts through bare ioredis (no Effect, no client), release → waiter holds, median of 50", "ms", {
        simba: R.summary.median(hFloors.scriptsBare),
        floor: R.summary.median(floor.pushHandoverAfterIdle)
      })
      row("handover", "floor: prescribed shell shape on the LeaseBackend (no engine), body ends → waiter's body starts, median of 50", "ms", {
        simba: R.summary.median(hFloors.shellShape),
        floor: R.summary.median(floor.pushHandoverAfterIdle)
      })
    }
    if (only === "handover") {
      await handoverSection()
      return printTable()
    }

    // ---- uncontended ----
    log("uncontended: simba")
    const uSimba = await R.uncontendedSimba(ctx)
    log("uncontended: floors (Simba's scripts through bare ioredis; the prescribed shell shape on the LeaseBackend)")
    const uFloors = await Floors.uncontendedFloors(ctx)
    log("uncontended: redlock")
    const uRedlock = await R.uncontendedPeer(ctx, "redlock")
    log("uncontended: redis-semaphore")
    const uMutex = await R.uncontendedPeer(ctx, "redisSemaphore")
    row("uncontended", "acquire + release on a fresh name, median (2,000 runs)", "µs", {
      simba: us(R.summary.median(uSimba.samples)),
      redlock: us(R.summary.median(uRedlock.samples)),
      redisSemaphore: us(R.summary.median(uMutex.samples)),
      floor: us(2 * evalMedian)
    })
    row("uncontended", "acquire + release on a fresh name, p99 (2,000 runs)", "µs", {
      simba: us(R.summary.p99(uSimba.samples)),
      redlock: us(R.summary.p99(uRedlock.samples)),
      redisSemaphore: us(R.summary.p99(uMutex.samples))
    })
    row("uncontended", "Simba withLock on one name reused, own client (diagnostic: no per-name growth), median", "µs", {
      simba: us(R.summary.median(uSimba.sameName)),
      floor: us(2 * evalMedian)
    })
    row("uncontended", "Simba LeaseBackend alone (acquire + release, no client/engine), median", "µs", {
      simba: us(R.summary.median(uSimba.backendOnly)),
      floor: us(2 * evalMedian)
    })
    row("uncontended", "Simba LeaseBackend alone (acquire + release, no client/engine), p99", "µs", {
      simba: us(R.summary.p99(uSimba.backendOnly))
    })
    row("uncontended", "floor: Simba's two scripts through bare ioredis (no Effect, no client), median", "µs", {
      simba: us(R.summary.median(uFloors.scriptsBare)),
      floor: us(2 * evalMedian)
    })
    row("uncontended", "floor: prescribed shell shape on the LeaseBackend (loop fiber, a fiber per call and body; no engine), median", "µs", {
      simba: us(R.summary.median(uFloors.shellShape))
    })
    row("uncontended", "process CPU time per acquire + release (user + system)", "µs", {
      simba: us(uSimba.cpuPerPair),
      redlock: us(uRedlock.cpuPerPair),
      redisSemaphore: us(uMutex.cpuPerPair)
    })
    row("uncontended", "Simba LeaseBackend alone, process CPU time per acquire + release", "µs", {
      simba: us(uSimba.backendOnlyCpuPerPair)
    })
    row("uncontended", "floor: Simba's two scripts through bare ioredis, process CPU time per pair", "µs", {
      simba: us(uFloors.scriptsBareCpuPerPair)
    })
    row("uncontended", "floor: prescribed shell shape on the LeaseBackend, process CPU time per pair", "µs", {
      simba: us(uFloors.shellShapeCpuPerPair)
    })
    row("uncontended", "Redis commands per acquire + release (server count, in-script commands included)", "commands", {
      simba: uSimba.commandsPerPair,
      redlock: uRedlock.commandsPerPair,
      redisSemaphore: uMutex.commandsPerPair
    })
    row("uncontended", "Redis server time per acquire + release (its own µs in the lock's commands, no network; floor: an EVAL of `return 1`)", "µs", {
      simba: uSimba.serverMicrosPerPair,
      redlock: uRedlock.serverMicrosPerPair,
      redisSemaphore: uMutex.serverMicrosPerPair,
      floor: floor.evalServerMicros
    })
    // What Simba's withLock cannot go below with today's scripts: the caller waits for one round trip
    // (an EVAL's), plus what its scripts cost the server beyond an EVAL's own: the acquire's, and the
    // previous release's, which the server runs just before (back to back, it is sent first).
    const oneTripFloor = us(evalMedian) + uSimba.serverMicrosPerPair - floor.evalServerMicros
    row("uncontended", "floor: one EVAL round trip + Simba's server time per acquire + release beyond an EVAL's", "µs", {
      floor: oneTripFloor
    })
    row("uncontended", "Simba round trips per acquire + release (client count, renewals left out)", "round trips", {
      simba: uSimba.roundTripsPerPair,
      floor: 2
    })

    log("uncontended: an idle Simba client of the same prefix in a process of its own, while this one takes 2,000 locks")
    const bystander = await Bystander.bystanderSimba(ctx.prefix)
    row("uncontended", "an idle client of the same prefix, another process: its CPU per lock taken here (floor: idle alone)", "µs", {
      simba: bystander.cpuPerLock,
      floor: bystander.idlePerLock
    })

    if (only === "uncontended") return printTable()

    // ---- contended ----
    log("contended: simba (11 s)")
    const cSimba = await isolated("contended simba", () => R.contendedSimba(ctx, uSimba))
    const contended: Record<R.Tuning, Record<R.PeerKind, R.ContendedResult>> = {} as never
    for (const tuning of ["defaults", "tuned"] as const) {
      contended[tuning] = {} as never
      for (const kind of ["redlock", "redisSemaphore"] as const) {
        log(`contended: ${kind} ${tuning} (11 s)`)
        contended[tuning][kind] = await isolated(
          `contended ${kind} ${tuning}`,
          () => R.contendedPeer(ctx, kind, tuning, kind === "redlock" ? uRedlock : uMutex)
        )
      }
    }
    for (const tuning of ["defaults", "tuned"] as const) {
      const peers = contended[tuning]
      const suffix = tuning === "defaults" ? " (peers at defaults)" : " (peers tuned)"
      const c = (f: (r: R.ContendedResult) => number) => ({
        simba: f(cSimba),
        redlock: f(peers.redlock),
        redisSemaphore: f(peers.redisSemaphore)
      })
      row("contended", `critical sections/s, 8 contenders${suffix}`, "1/s", c((r) => r.sectionsPerSecond))
      row("contended", `fairness, Jain's index of per-contender counts${suffix}`, "index", c((r) => r.fairness))
      row("contended", `longest single wait${suffix}`, "ms", c((r) => r.longestWaitMs))
      row("contended", `waiter load, Redis commands/s (server count − pairs − renewals)${suffix}`, "1/s", c((r) => r.waiterCommandsPerSecond))
      row("contended", `waiter load, round trips/s (client count − 2 per pair − renewals)${suffix}`, "1/s", c((r) => r.waiterRoundTripsPerSecond))
      row("contended", `waiter round trips per critical section${suffix}`, "round trips", c((r) => r.waiterRoundTripsPerSecond / r.sectionsPerSecond))
      row("contended", `process CPU time per critical section (the 8 contenders' process)${suffix}`, "µs", c((r) => us(r.cpuPerSection)))
      row("contended", `process CPU time / wall time in the window (1: one core busy)${suffix}`, "share", c((r) => r.cpuShare))
    }
    row("contended", "session renewals of the 8 clients, Redis commands/s (not in the waiter load)", "1/s", {
      simba: cSimba.sessionCommandsPerSecond,
      redlock: 0,
      redisSemaphore: 0
    })
    log("contended: floors (Simba's scripts through bare ioredis; the prescribed shell shape on the LeaseBackend; 11 s each)")
    const cFloors = await Floors.contendedFloors(ctx)
    for (const [label, r] of [
      ["floor: Simba's scripts through bare ioredis (fair hand-off, no client)", cFloors.scriptsBare],
      ["floor: prescribed shell shape on the LeaseBackend (no engine)", cFloors.shellShape]
    ] as const) {
      row("contended", `${label}, critical sections/s`, "1/s", { simba: r.sectionsPerSecond })
      row("contended", `${label}, fairness`, "index", { simba: r.fairness })
      row("contended", `${label}, longest single wait`, "ms", { simba: r.longestWaitMs })
      row("contended", `${label}, process CPU time per critical section`, "µs", { simba: us(r.cpuPerSection) })
    }
    const perContender = (r: R.ContendedResult) => `[${r.perContender.join(" ")}]`
    notes.push(
      `contended per-contender sections: simba ${perContender(cSimba)}; ` +
        (["defaults", "tuned"] as const).map((t) =>
          `redlock ${t} ${perContender(contended[t].redlock)}, redis-semaphore ${t} ${perContender(contended[t].redisSemaphore)}`
        ).join("; ")
    )

    if (only === "contended") return printTable()

    // ---- renew ----
    log("renew: simba (~12 s)")
    const rSimba = await isolated("renew simba", () => R.renewSimba(ctx))
    log("renew: redlock (~14 s)")
    const rRedlock = await isolated("renew redlock", () => R.renewPeer(ctx, "redlock"))
    log("renew: redis-semaphore (~14 s)")
    const rMutex = await isolated("renew redis-semaphore", () => R.renewPeer(ctx, "redisSemaphore"))
    const rr = (f: (r: R.RenewResult) => number) => ({ simba: f(rSimba), redlock: f(rRedlock), redisSemaphore: f(rMutex) })
    row("renew", "round trips/s to keep 1,000 leases held (client count, 10 s idle)", "1/s", { ...rr((r) => r.roundTripsPerSecond) })
    row("renew", "round trips per renewal period (Simba: renewInterval; peers: their refresh period)", "round trips", {
      ...rr((r) => r.roundTripsPerPeriod),
      floor: 1
    })
    row("renew", "renewal period of a lease", "ms", rr((r) => r.periodMs))
    row("renew", "Redis commands/s to keep 1,000 leases (server count, in-script commands included)", "1/s", rr((r) => r.serverCommandsPerSecond))
    row("renew", "leases still held at the end of the window", "leases", rr((r) => r.heldAtEnd))
    const renewCommands = await R.renewCommandsSimba(ctx)
    row("renew", R.renewCommandsMetric, "commands", { simba: renewCommands.unchanged })

    // ---- renew10k ----
    await renew10k()

    // ---- handover ----
    await handoverSection()

    // ---- cached ----
    await cachedSection()

    // ---- holds ----
    await holdsSection()

    const engineEvents = await engineSection()

    const backgroundAfter = await background()
    log(`background traffic from other clients: ${backgroundAfter} commands/s`)

    // ---- output ----
    const out = fileURLToPath(new URL("./results.json", import.meta.url))
    writeFileSync(out, `${JSON.stringify(rows, null, 2)}\n`)
    console.log()
    printTable()
    console.log()
    // The issues' targets are judged from the results files once SQL and ZooKeeper have run too
    // (`targets.ts`, printed and recorded by `report.ts`); here only what explains them.
    const uFast = Math.min(R.summary.median(uRedlock.samples), R.summary.median(uMutex.samples))
    console.log("Beside the targets (judged at the end of the run):")
    console.log(
      `  uncontended: its floor with today's scripts (one EVAL round trip + ${uSimba.serverMicrosPerPair.toFixed(1)} µs of server time per pair, ` +
        `the peers' ${uRedlock.serverMicrosPerPair.toFixed(1)} / ${uMutex.serverMicrosPerPair.toFixed(1)} µs): ${oneTripFloor.toFixed(0)} µs = ` +
        `${(oneTripFloor / us(uFast)).toFixed(2)}× the faster peer`
    )
    console.log(`  contended waiter round trips: ${cSimba.waiterRoundTripsPerSecond.toFixed(1)}/s (${cSimba.waiterCommandsPerSecond.toFixed(0)} commands/s by the server count)`)
    console.log(`  renew: ${rSimba.roundTripsPerPeriod.toFixed(2)} round trips per renew interval (≤ 1: one per session)`)
    console.log()
    console.log("How the counts are made:")
    console.log("  Redis commands = INFO stats total_commands_processed deltas read on a separate connection; Redis counts the")
    console.log("  commands a Lua script runs too (an EVALSHA making 4 redis.call counts 5); the INFO itself is subtracted.")
    console.log("  Round trips = commands this process's ioredis connections sent (ioredis sendCommand wrapped), a script = 1.")
    console.log("  Waiter load (contended) = (commands in the 10 s window − sections in the window × commands per acquire+release")
    console.log("  pair, measured uncontended as the least of 5 batches of 50 − Simba renewals in the window × commands per")
    console.log("  keepAlive, measured the same way) / window seconds; in round trips: (round trips − 2 per section − renewals) / s.")
    console.log("  Renew: peers keep each lock with their own auto-refresh (redlock `using`, Mutex refreshInterval) at defaults,")
    console.log("  acquisitions spread over one period so that refreshes come at a steady rate.")
    console.log("  Longest wait: every wait overlapping the window, whole; a contender that never wins waits until the others stop,")
    console.log("  so a starved contender shows the length of the run (~10.5 s).")
    console.log("  Tuned redlock: retryDelay 5 ms with retryJitter left at its default 100 ms (only retryDelay is tuned).")
    console.log(`  Background traffic from other clients of this Redis: ${backgroundBefore} commands/s before the run, ${backgroundAfter} after`)
    console.log("  (server-side counts include it; client-side round trips do not). Each server-counted window compares the")
    console.log("  server's EVALSHA/EVAL calls with the scripts this process sent; a window where other clients ran scripts is")
    console.log("  measured once more, and listed below if it happens again.")
    for (const note of notes) console.log(`  ${note}`)
    console.log(
      `  Simba contended: ${cSimba.sections} sections, ${cSimba.roundTrips} round trips (${cSimba.sessionRoundTrips} renewals), ` +
        `${cSimba.serverCommands} commands in ${(cSimba.windowMs / 1000).toFixed(2)} s; ` +
        `${uSimba.commandsPerPair.toFixed(1)} commands per pair, ${uSimba.commandsPerKeepAlive.toFixed(1)} per keepAlive.`
    )
    console.log(
      `  Engine: ${engineEvents.events.toLocaleString("en-US")} events replayed per case; ` +
        `load average now ${loadavg().map((x) => x.toFixed(2)).join(" ")}; total ${((Date.now() - started) / 1000).toFixed(0)} s.`
    )
    console.log(`Wrote ${out}`)
    await (await import("./zookeeper.js")).main(log) // ZooKeeper: bench/results-zookeeper.json
    await (await import("./sql.js")).main(log) // PostgreSQL and MySQL/MariaDB: bench/results-sql.json
    await writeReport(log, started) // records the run's targets, then docs/performance.md
  } finally {
    const deleted = await deleteKeys(monitor, [`${prefix}:`, `mutex:${prefix}:`])
    log(`deleted ${deleted} keys under ${prefix}`)
    await quit(monitor)
  }
}

main().then(
  () => {
    process.exitCode = 0
  },
  (error: unknown) => {
    console.error(error)
    process.exitCode = 1
  }
)
