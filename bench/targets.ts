/**
 * The issues' performance targets, each computed from one full run's results files, and the record
 * of the last full runs (`bench/history.json`) that gives each target its spread: the machine's speed
 * drifts between runs (the same build has given 1.05× and 1.86× on one row in a day), so a target is
 * judged over several runs, not one. `npm run bench` appends a record after a full run;
 * `report.ts` shows the last runs in docs/performance.md.
 */
import { existsSync, readFileSync, writeFileSync } from "node:fs"
import { fileURLToPath } from "node:url"
import { find, isNumber, type RedisRow, type SqlRow, type ZkRow } from "./rows.js"

/** The three results files of one full run. */
export interface Results {
  readonly redis: ReadonlyArray<RedisRow>
  readonly sql: ReadonlyArray<SqlRow>
  readonly zk: ReadonlyArray<ZkRow>
}

/** A target's figure in one run: its value in `unit` and whether the goal was met (`undefined`: no figure). */
export interface Measured {
  readonly value: number | undefined
  readonly met: boolean | undefined
}

export interface Target {
  /** The issue that sets it. */
  readonly issue: number
  /** What is measured; also the key of the target in the history. */
  readonly label: string
  readonly unit: "ratio" | "ms" | "µs" | "index" | "round trips"
  /** The goal, as the issue states it. */
  readonly goal: string
  readonly measure: (results: Results) => Measured
}


/** `value` with `ok(value)`; no verdict when a figure is missing. */
const judged = (value: number | undefined, ok: (value: number) => boolean): Measured => ({
  value,
  met: value === undefined ? undefined : ok(value)
})

const ratioOf = (x: number | null | undefined, of: number | null | undefined): number | undefined =>
  isNumber(x) && isNumber(of) && of !== 0 ? x / of : undefined

const least = (...xs: ReadonlyArray<number | null | undefined>): number | undefined => {
  const known = xs.filter(isNumber)
  return known.length === 0 ? undefined : Math.min(...known)
}

const most = (...xs: ReadonlyArray<number | null | undefined>): number | undefined => {
  const known = xs.filter(isNumber)
  return known.length === 0 ? undefined : Math.max(...known)
}

const redis = (r: Results, bench: string, metric: RegExp) => find(r.redis, bench, metric)
const sql = (r: Results, bench: string, metric: RegExp) => find(r.sql, bench, metric)

/** Simba's figure of a Redis row ÷ the faster (lower) peer's. */
const versusFasterPeer = (r: Results, bench: string, metric: RegExp) => {
  const row = redis(r, bench, metric)
  return ratioOf(row?.simba, least(row?.redlock, row?.redisSemaphore))
}

const simbaOf = (r: Results, bench: string, metric: RegExp) => redis(r, bench, metric)?.simba ?? undefined

const cluster = (kind: "locks" | "partitions of one group", figure: string): RegExp =>
  new RegExp(`^${figure}.*\\(Cluster, 10,000 ${kind}`)

/** Issue 29's Redis Cluster rows: each figure of a renewal, for 10,000 locks and 10,000 partitions. */
const clusterTargets: ReadonlyArray<Target> = [
  { figure: "round trips per renewal", metric: "Redis round trips per renewal", unit: "round trips", goal: "≤ 3 (the masters)", ok: (x: number) => x <= 3 },
  { figure: "keepAlive p50", metric: "keepAlive round trip, median", unit: "ms", goal: "< 5 ms", ok: (x: number) => x < 5 },
  { figure: "process CPU per renewal", metric: "process CPU per renewal", unit: "ms", goal: "< 5 ms", ok: (x: number) => x < 5 }
].flatMap(({ figure, goal, metric, ok, unit }) =>
  (["locks", "partitions"] as const).map((shape): Target => ({
    issue: 29,
    label: `Redis Cluster, 10,000 ${shape}: ${figure}`,
    unit: unit as Target["unit"],
    goal,
    measure: (r) => judged(simbaOf(r, "renew10k", cluster(shape === "locks" ? "locks" : "partitions of one group", metric)), ok)
  }))
)

const idleClient = (leases: string) => (r: Results) => {
  const row = redis(r, "renew10k", new RegExp(`^idle client holding ${leases} locks`))
  return judged(ratioOf(row?.simba, row?.floor), (x) => x <= 1.5)
}

export const targets: ReadonlyArray<Target> = [
  {
    issue: 28,
    label: "Redis: uncontended withLock on a fresh name, median ÷ the faster peer",
    unit: "ratio",
    goal: "≤ 0.8×",
    measure: (r) => judged(versusFasterPeer(r, "uncontended", /^acquire \+ release on a fresh name, median/), (x) => x <= 0.8)
  },
  {
    issue: 28,
    label: "Redis: process CPU per acquire + release ÷ the faster peer's",
    unit: "ratio",
    goal: "≤ 2.0×",
    measure: (r) => judged(versusFasterPeer(r, "uncontended", /^process CPU time per acquire \+ release/), (x) => x <= 2)
  },
  {
    issue: 28,
    label: "Redis: process CPU per acquire + release ÷ the bare-scripts floor's",
    unit: "ratio",
    goal: "≤ 1.6×",
    measure: (r) =>
      judged(
        ratioOf(
          simbaOf(r, "uncontended", /^process CPU time per acquire \+ release/),
          simbaOf(r, "uncontended", /^floor: Simba's two scripts through bare ioredis, process CPU/)
        ),
        (x) => x <= 1.6
      )
  },
  {
    issue: 28,
    label: "Redis, keep: one name taken again and again, median ÷ the faster peer",
    unit: "ratio",
    goal: "≤ 0.1×",
    measure: (r) => judged(versusFasterPeer(r, "cached", /^keep: one name taken again and again by one client, median/), (x) => x <= 0.1)
  },
  {
    issue: 28,
    label: "Redis, keep: process CPU per body ÷ the faster peer's",
    unit: "ratio",
    goal: "≤ 0.3×",
    measure: (r) => judged(versusFasterPeer(r, "cached", /^keep: process CPU time per body/), (x) => x <= 0.3)
  },
  {
    issue: 28,
    label: "Redis, keep: round trips per body (renewals left out)",
    unit: "round trips",
    goal: "0",
    measure: (r) => judged(simbaOf(r, "cached", /^keep: round trips per body/), (x) => x === 0)
  },
  {
    issue: 28,
    label: "Redis, keep: the holder's body ends → a waiting client's body starts, median",
    unit: "ms",
    goal: "≤ 1.5 ms",
    measure: (r) => judged(simbaOf(r, "cached", /^keep: the holder's body ends while a second client waits/), (x) => x <= 1.5)
  },
  {
    issue: 28,
    label: "Redis: contended critical sections/s ÷ the faster peer's (at any setting)",
    unit: "ratio",
    goal: "≥ 0.9×",
    measure: (r) => {
      const defaults = redis(r, "contended", /^critical sections\/s, 8 contenders \(peers at defaults\)/)
      const tuned = redis(r, "contended", /^critical sections\/s, 8 contenders \(peers tuned\)/)
      const best = most(defaults?.redlock, defaults?.redisSemaphore, tuned?.redlock, tuned?.redisSemaphore)
      return judged(ratioOf(defaults?.simba, best), (x) => x >= 0.9)
    }
  },
  {
    issue: 28,
    label: "Redis: contended fairness (Jain's index)",
    unit: "index",
    goal: "≥ 0.99",
    measure: (r) => judged(simbaOf(r, "contended", /^fairness, .*\(peers at defaults\)/), (x) => x >= 0.99)
  },
  {
    issue: 28,
    label: "Redis: contended longest wait",
    unit: "ms",
    goal: "< 100 ms",
    measure: (r) => judged(simbaOf(r, "contended", /^longest single wait \(peers at defaults\)/), (x) => x < 100)
  },
  {
    issue: 28,
    label: "Redis: hand-over, release → waiter holds, median",
    unit: "ms",
    goal: "≤ 1.0 ms and ≤ 1.4× the bare-scripts floor",
    measure: (r) => {
      const median = simbaOf(r, "handover", /^release → waiter holds, median .*\(peers at defaults\)/)
      const floor = simbaOf(r, "handover", /^floor: Simba's scripts through bare ioredis .*release → waiter holds, median/)
      return judged(median, (x) => x <= 1 && isNumber(floor) && x <= 1.4 * floor)
    }
  },
  ...clusterTargets,
  {
    issue: 29,
    label: "PostgreSQL: uncontended withLock, median ÷ the advisory-lock pair",
    unit: "ratio",
    goal: "≤ 2.5×",
    measure: (r) => {
      const row = sql(r, "sql uncontended", /^withLock on a fresh name, median/)
      return judged(ratioOf(row?.postgres, row?.peerPostgres), (x) => x <= 2.5)
    }
  },
  {
    issue: 29,
    label: "PostgreSQL: hand-over, release → waiter holds, median",
    unit: "ms",
    goal: "< 1.5 ms",
    measure: (r) => judged(sql(r, "sql handover", /^release → waiter holds, median/)?.postgres ?? undefined, (x) => x < 1.5)
  },
  {
    issue: 29,
    label: "MySQL/MariaDB: uncontended withLock, median ÷ the GET_LOCK pair",
    unit: "ratio",
    goal: "≤ 3×, or the measured floor (one durable commit behind another)",
    measure: (r) => {
      const row = sql(r, "sql uncontended", /^withLock on a fresh name, median/)
      const floor = sql(r, "sql uncontended", /^floor of withLock/)?.mysql
      return judged(ratioOf(row?.mysql, row?.peerMysql), (x) =>
        x <= 3 || (isNumber(row?.mysql) && isNumber(floor) && row.mysql <= floor))
    }
  },
  {
    issue: 29,
    label: "idle client holding 10 locks: process CPU per renewal ÷ a bare client's",
    unit: "ratio",
    goal: "≤ 1.5×",
    measure: idleClient("10")
  },
  {
    issue: 29,
    label: "idle client holding 10,000 locks: process CPU per renewal ÷ a bare client's",
    unit: "ratio",
    goal: "≤ 1.5×",
    measure: idleClient("10,000")
  },
  {
    issue: 29,
    label: "SQL failover: holder frozen → waiter holds, worst of both stores",
    unit: "ms",
    goal: "≤ leaseDuration + renewInterval (2,667 ms)",
    measure: (r) => {
      const row = sql(r, "sql failover", /^holder frozen → waiter holds, max/)
      return judged(most(row?.postgres, row?.mysql), (x) => x <= 2667)
    }
  },
  {
    issue: 30,
    label: "permits: uncontended acquire + release ÷ Semaphore's, beside withLock ÷ the faster peer",
    unit: "ratio",
    goal: "within withLock's ratio",
    measure: (r) => {
      const permit = redis(r, "holds", /^uncontended acquire \+ release of 1 of 3 permits, median of 2,000 \(peer: Semaphore\)/)
      const lock = versusFasterPeer(r, "uncontended", /^acquire \+ release on a fresh name, median/)
      return judged(ratioOf(permit?.simba, permit?.redisSemaphore), (x) => isNumber(lock) && x <= lock)
    }
  },
  {
    issue: 30,
    label: "permits: 8 contenders on 3, sections/s ÷ Semaphore's",
    unit: "ratio",
    goal: "≥ 0.9×",
    measure: (r) => {
      const row = redis(r, "holds", /^8 contenders on 3 permits, sections\/s \(peer: Semaphore\)/)
      return judged(ratioOf(row?.simba, row?.redisSemaphore), (x) => x >= 0.9)
    }
  },
  {
    issue: 30,
    label: "permits: 8 contenders on 3, fairness (Jain's index)",
    unit: "index",
    goal: "≥ 0.99",
    measure: (r) => judged(simbaOf(r, "holds", /^8 contenders on 3 permits, fairness \(Jain\) \(peer: Semaphore\)/), (x) => x >= 0.99)
  },
  {
    issue: 30,
    label: "permits: 8 contenders on 3, longest wait",
    unit: "ms",
    goal: "< 100 ms",
    measure: (r) => judged(simbaOf(r, "holds", /^8 contenders on 3 permits, longest wait \(peer: Semaphore\)/), (x) => x < 100)
  },
  {
    issue: 30,
    label: "read-write lock, readers arriving continuously: a writer's longest wait",
    unit: "ms",
    goal: "< 100 ms",
    measure: (r) => judged(simbaOf(r, "holds", /^read-write lock, 6 readers \+ 2 writers: a writer's longest wait/), (x) => x < 100)
  }
]

/** One full run in the history: when, and each target's figure and verdict (by label; `null`: missing). */
export interface RunRecord {
  readonly at: string
  readonly values: Readonly<Record<string, { readonly value: number | null; readonly met: boolean | null }>>
}

/** How many full runs the history keeps. */
export const KEPT_RUNS = 10

const historyFile = fileURLToPath(new URL("./history.json", import.meta.url))

export const readHistory = (): ReadonlyArray<RunRecord> =>
  existsSync(historyFile) ? (JSON.parse(readFileSync(historyFile, "utf8")) as ReadonlyArray<RunRecord>) : []

/** Appends the targets' figures of a full run to `bench/history.json` (the last `KEPT_RUNS` kept). */
export const record = (results: Results, at: Date): RunRecord => {
  const values: Record<string, { readonly value: number | null; readonly met: boolean | null }> = {}
  for (const target of targets) {
    const { met, value } = target.measure(results)
    values[target.label] = { value: value ?? null, met: met ?? null }
  }
  const run: RunRecord = { at: at.toISOString(), values }
  writeFileSync(historyFile, `${JSON.stringify([...readHistory(), run].slice(-KEPT_RUNS), null, 2)}\n`)
  return run
}
