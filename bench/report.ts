/**
 * Writes docs/performance.md from the bench's results files: `bench/results.json` (Redis: Simba
 * beside redlock and redis-semaphore, the floors, the engine), `bench/results-sql.json` and
 * `bench/results-zookeeper.json`. The page's text is the template below; every figure comes from the
 * files, so the page always shows the last full run whose results are in the tree.
 *
 *   npm run bench:report        (or: node --import tsx bench/report.ts)
 *
 * `npm run bench` (`run.ts`) calls `main` once a full run has written the three files. A row missing
 * from a file (an older file, a section that failed) shows as "—".
 */
import { existsSync, readFileSync, writeFileSync } from "node:fs"
import { fileURLToPath } from "node:url"
import { find, isNumber, type RedisRow, type SqlRow, type ZkRow } from "./rows.js"
import { readHistory, record, type Results, type RunRecord, type Target, targets } from "./targets.js"

const here = (file: string) => fileURLToPath(new URL(file, import.meta.url))

const read = <A>(file: string): ReadonlyArray<A> => {
  const path = here(file)
  return existsSync(path) ? (JSON.parse(readFileSync(path, "utf8")) as ReadonlyArray<A>) : []
}

// -------------------------------------------------------------------------------------------------
// Formatting
// -------------------------------------------------------------------------------------------------


const grouped = (x: number): string => Math.round(x).toLocaleString("en-US")

/** A number with about three significant digits. */
const plain = (x: number): string => {
  const a = Math.abs(x)
  if (a >= 100 || Number.isInteger(x)) return grouped(x)
  if (a >= 10) return x.toFixed(1)
  if (a >= 1) return x.toFixed(2)
  return x.toFixed(a === 0 ? 0 : 3)
}

/** A figure in its unit, switched to a larger unit where that reads better. */
const fmt = (x: number | null | undefined, unit: string): string => {
  if (!isNumber(x)) return "—"
  switch (unit) {
    case "µs":
      return x >= 1000 ? fmt(x / 1000, "ms") : `${plain(x)} µs`
    case "ms":
      return x >= 1000 ? `${(x / 1000).toFixed(x >= 10_000 ? 1 : 2)} s` : `${plain(x)} ms`
    case "1/s":
      return `${plain(x)}/s`
    case "index":
      return x.toFixed(3)
    case "bytes":
      return `${(x / 1000).toFixed(2)} kB`
    case "ratio":
      return `${x.toFixed(2)}×`
    case "":
    case "commands":
    case "round trips":
    case "queries":
    case "calls":
    case "requests":
    case "leases":
    case "renewals":
    case "rows":
      // Counts: the row's label says of what.
      return plain(x)
    default:
      return `${plain(x)} ${unit}`
  }
}

const ratio = (x: number | null | undefined, of: number | null | undefined): string => {
  if (!isNumber(x) || !isNumber(of) || of === 0) return "—"
  const r = x / of
  return `${r === 0 ? "0" : r >= 0.1 ? r.toFixed(2) : r.toPrecision(2)}×`
}

const table = (header: ReadonlyArray<string>, body: ReadonlyArray<ReadonlyArray<string>>): string =>
  [
    `| ${header.join(" | ")} |`,
    `|${header.map((_, i) => (i === 0 ? "---" : "---:")).join("|")}|`,
    ...body.map((cells) => `| ${cells.join(" | ")} |`)
  ].join("\n")

// -------------------------------------------------------------------------------------------------
// The tables
// -------------------------------------------------------------------------------------------------

type Better = "lower" | "higher"

interface PeerLine {
  readonly label: string
  readonly bench: string
  readonly metric: RegExp
  readonly better: Better
}

const peerLines: ReadonlyArray<PeerLine> = [
  { label: "uncontended acquire + release, median", bench: "uncontended", metric: /^acquire \+ release on a fresh name, median/, better: "lower" },
  { label: "uncontended acquire + release, p99", bench: "uncontended", metric: /^acquire \+ release on a fresh name, p99/, better: "lower" },
  { label: "process CPU per acquire + release", bench: "uncontended", metric: /^process CPU time per acquire \+ release/, better: "lower" },
  { label: "Redis commands per acquire + release (in-script ones counted)", bench: "uncontended", metric: /^Redis commands per acquire \+ release/, better: "lower" },
  { label: "Redis server time per acquire + release (its own µs, no network)", bench: "uncontended", metric: /^Redis server time per acquire \+ release/, better: "lower" },
  { label: "contended: critical sections/s, 8 contenders", bench: "contended", metric: /^critical sections\/s, 8 contenders \(peers at defaults\)/, better: "higher" },
  { label: "contended: critical sections/s, peers tuned", bench: "contended", metric: /^critical sections\/s, 8 contenders \(peers tuned\)/, better: "higher" },
  { label: "contended: fairness (Jain's index, 1 = equal shares)", bench: "contended", metric: /^fairness, .*\(peers at defaults\)/, better: "higher" },
  { label: "contended: longest single wait", bench: "contended", metric: /^longest single wait \(peers at defaults\)/, better: "lower" },
  { label: "contended: waiter round trips per critical section", bench: "contended", metric: /^waiter round trips per critical section \(peers at defaults\)/, better: "lower" },
  { label: "contended: process CPU per critical section", bench: "contended", metric: /^process CPU time per critical section .*\(peers at defaults\)/, better: "lower" },
  { label: "hand-over (release → waiter holds), median", bench: "handover", metric: /^release → waiter holds, median .*\(peers at defaults\)/, better: "lower" },
  { label: "hand-over, median, peers tuned", bench: "handover", metric: /^release → waiter holds, median .*\(peers tuned\)/, better: "lower" },
  { label: "keep: one name taken again and again by one client, median", bench: "cached", metric: /^keep: one name taken again and again by one client, median/, better: "lower" },
  { label: "keep: process CPU per body", bench: "cached", metric: /^keep: process CPU time per body/, better: "lower" },
  { label: "keep: round trips per body", bench: "cached", metric: /^keep: round trips per body/, better: "lower" },
  { label: "renewal: round trips per renewal period, 1,000 leases held", bench: "renew", metric: /^round trips per renewal period/, better: "lower" },
  { label: "renewal: Redis commands/s to keep 1,000 leases", bench: "renew", metric: /^Redis commands\/s to keep 1,000 leases/, better: "lower" }
]

const peersTable = (rows: ReadonlyArray<RedisRow>): string =>
  table(
    ["", "better", "Simba", "redlock", "redis-semaphore", "Simba ÷ the better peer"],
    peerLines.map((line) => {
      const row = find(rows, line.bench, line.metric)
      const peers = [row?.redlock, row?.redisSemaphore].filter(isNumber)
      const better = peers.length === 0 ? undefined : line.better === "lower" ? Math.min(...peers) : Math.max(...peers)
      const unit = row?.unit ?? ""
      return [
        line.label,
        line.better,
        fmt(row?.simba, unit),
        fmt(row?.redlock, unit),
        fmt(row?.redisSemaphore, unit),
        ratio(row?.simba, better)
      ]
    })
  )

interface FloorLine {
  readonly label: string
  /** The floor's figure. */
  readonly floor: (rows: ReadonlyArray<RedisRow>) => { readonly value: number | null | undefined; readonly unit: string }
  /** Simba's figure it bounds. */
  readonly simba: (rows: ReadonlyArray<RedisRow>) => { readonly value: number | null | undefined; readonly unit: string }
}

const column = (bench: string, metric: RegExp, key: "simba" | "floor") => (rows: ReadonlyArray<RedisRow>) => {
  const row = find(rows, bench, metric)
  return { value: row?.[key], unit: row?.unit ?? "" }
}

const simbaMedian = column("uncontended", /^acquire \+ release on a fresh name, median/, "simba")
const simbaCpu = column("uncontended", /^process CPU time per acquire \+ release/, "simba")
const simbaSections = column("contended", /^critical sections\/s, 8 contenders \(peers at defaults\)/, "simba")
const simbaSectionCpu = column("contended", /^process CPU time per critical section .*\(peers at defaults\)/, "simba")
const simbaHandover = column("handover", /^release → waiter holds, median .*\(peers at defaults\)/, "simba")

const floorLines: ReadonlyArray<FloorLine> = [
  {
    label: "two `EVAL`s of `return 1`: the network's least for any lock of two round trips",
    floor: column("uncontended", /^acquire \+ release on a fresh name, median/, "floor"),
    simba: simbaMedian
  },
  {
    label: "one `EVAL` round trip + what Simba's acquire and release cost the server beyond an `EVAL`: the least a lock of one awaited round trip with today's scripts can cost",
    floor: column("uncontended", /^floor: one EVAL round trip \+ Simba's server time/, "floor"),
    simba: simbaMedian
  },
  {
    label: "floor 1: Simba's two scripts through a bare ioredis connection (no Effect, no client), median",
    floor: column("uncontended", /^floor: Simba's two scripts through bare ioredis \(no Effect, no client\), median/, "simba"),
    simba: simbaMedian
  },
  {
    label: "floor 1: its process CPU per acquire + release",
    floor: column("uncontended", /^floor: Simba's two scripts through bare ioredis, process CPU/, "simba"),
    simba: simbaCpu
  },
  {
    label: "floor 2: the prescribed shell shape on the `LeaseBackend` (no engine), median",
    floor: column("uncontended", /^floor: .*shell shape on the LeaseBackend \(loop fiber.*median/, "simba"),
    simba: simbaMedian
  },
  {
    label: "floor 2: its process CPU per acquire + release",
    floor: column("uncontended", /^floor: .*shell shape on the LeaseBackend, process CPU/, "simba"),
    simba: simbaCpu
  },
  {
    label: "the `LeaseBackend` alone (no client, no engine), median",
    floor: column("uncontended", /^Simba LeaseBackend alone \(acquire \+ release, no client\/engine\), median/, "simba"),
    simba: simbaMedian
  },
  {
    label: "the `LeaseBackend` alone, process CPU per acquire + release",
    floor: column("uncontended", /^Simba LeaseBackend alone, process CPU/, "simba"),
    simba: simbaCpu
  },
  {
    label: "contended, floor 1 (Simba's scripts, the same fair hand-off, no client): critical sections/s",
    floor: column("contended", /^floor: Simba's scripts through bare ioredis .*critical sections\/s/, "simba"),
    simba: simbaSections
  },
  {
    label: "contended, floor 2 (the shell shape): critical sections/s",
    floor: column("contended", /^floor: .*shell shape .*critical sections\/s/, "simba"),
    simba: simbaSections
  },
  {
    label: "contended, floor 1: process CPU per critical section",
    floor: column("contended", /^floor: Simba's scripts through bare ioredis .*process CPU/, "simba"),
    simba: simbaSectionCpu
  },
  {
    label: "contended, floor 2: process CPU per critical section",
    floor: column("contended", /^floor: .*shell shape .*process CPU/, "simba"),
    simba: simbaSectionCpu
  },
  {
    label: "hand-over: a script that publishes, heard, then one `EVAL`, after the same idle",
    floor: column("floor", /^push handover, each after/, "floor"),
    simba: simbaHandover
  },
  {
    label: "hand-over, floor 1: Simba's release script through bare ioredis, the waiter told on its channel",
    floor: column("handover", /^floor: Simba's scripts through bare ioredis/, "simba"),
    simba: simbaHandover
  },
  {
    label: "hand-over, floor 2: the shell shape on both sides (body ends → body starts; Simba measured the same way)",
    floor: column("handover", /^floor: .*shell shape .*body ends/, "simba"),
    simba: column("handover", /^Simba withLock both sides/, "simba")
  },
  {
    label: "renewal, 10,000 locks held: CPU of a process that only measures (per 1 s)",
    floor: column("renew10k", /^floor: process CPU of a process that only measures/, "floor"),
    simba: column("renew10k", /^process CPU per renewal, idle elections included, median 1 s slice \(single node, 10,000 locks\)/, "simba")
  },
  {
    label: "idle client holding 10 locks, a process of its own measured as the floor's: CPU per renewal beside a bare ioredis client's `PING` per interval",
    floor: column("renew10k", /^floor: process CPU with a bare ioredis client/, "floor"),
    simba: column("renew10k", /^idle client holding 10 locks, a process of its own/, "simba")
  },
  {
    label: "idle client holding 10,000 locks, the same",
    floor: column("renew10k", /^floor: process CPU with a bare ioredis client/, "floor"),
    simba: column("renew10k", /^idle client holding 10,000 locks, a process of its own/, "simba")
  },
  {
    label: "an idle client of the same key prefix, in another process: its CPU per lock taken here (floor: idle alone)",
    floor: column("uncontended", /^an idle client of the same prefix/, "floor"),
    simba: column("uncontended", /^an idle client of the same prefix/, "simba")
  }
]

const floorsTable = (rows: ReadonlyArray<RedisRow>): string =>
  table(
    ["floor", "its figure", "Simba's figure", "Simba ÷ floor"],
    floorLines.map((line) => {
      const floor = line.floor(rows)
      const simba = line.simba(rows)
      return [line.label, fmt(floor.value, floor.unit), fmt(simba.value, simba.unit), ratio(simba.value, floor.value)]
    })
  )

const backendsTable = (sql: ReadonlyArray<SqlRow>, zk: ReadonlyArray<ZkRow>): string => {
  const s = (bench: string, metric: RegExp) => find(sql, bench, metric)
  const z = (bench: string, metric: RegExp) => find(zk, bench, metric)
  const pair = (row: SqlRow | undefined, keys: readonly ["postgres" | "peerPostgres", "mysql" | "peerMysql"]) =>
    keys.map((key) => fmt(row?.[key], row?.unit ?? ""))
  const lock = s("sql uncontended", /^withLock on a fresh name, median/)
  const backendAlone = s("sql uncontended", /^LeaseBackend alone, acquire \+ release, median/)
  const durable = s("sql uncontended", /^durable floor/)
  const unflushed = s("sql uncontended", /^floor without the flush/)
  const behind = s("sql uncontended", /^floor of withLock/)
  const routines = s("sql uncontended", /^floor \(PostgreSQL\): Simba's acquire and release routines/)
  const handover = s("sql handover", /^release → waiter holds, median/)
  const handoverFloor = s("sql handover", /^floor \(PostgreSQL\)/)
  const handoverUnflushed = s("sql handover", /^floor without the flush \(PostgreSQL/)
  const renew = s("sql renew", /^queries per renew interval/)
  const failover = s("sql failover", /max of/)
  const zkLock = z("zk uncontended", /^withLock on a fresh name, median/)
  const zkAlone = z("zk uncontended", /^LeaseBackend alone/)
  const zkHandover = z("zk handover", /^release → waiter holds \(watch\), median/)
  const zkRenew = z("zk renew", /^backend calls per renewal/)
  const zkCadence = z("zk renew", /^renewals per configured renewInterval/)
  const zkFailover = z("zk failover", /max of/)
  return table(
    ["", "PostgreSQL", "MySQL/MariaDB", "ZooKeeper"],
    [
      ["`withLock` on a fresh name, median", ...pair(lock, ["postgres", "mysql"]), fmt(zkLock?.simba, zkLock?.unit ?? "")],
      ["`LeaseBackend` alone, acquire + release, median", ...pair(backendAlone, ["postgres", "mysql"]), fmt(zkAlone?.simba, zkAlone?.unit ?? "")],
      [
        "floor of that pair: two durable one-row commits (SQL); an ephemeral create + delete (ZooKeeper)",
        ...pair(durable, ["postgres", "mysql"]),
        fmt(zkAlone?.floor, zkAlone?.unit ?? "")
      ],
      [
        "the same two commits without the flush, as PostgreSQL's routines commit",
        fmt(unflushed?.postgres, unflushed?.unit ?? ""),
        "— (the flush setting is server-wide)",
        "—"
      ],
      [
        "floor of `withLock` (its release not awaited): one commit right behind another's, as Simba commits",
        ...pair(behind, ["postgres", "mysql"]),
        "—"
      ],
      [
        "Simba's acquire and release routines with no client: the acquire awaited, its release sent behind it and not awaited (PostgreSQL)",
        fmt(routines?.postgres, routines?.unit ?? ""),
        "—",
        "—"
      ],
      ["a raw advisory-lock pair, which keeps nothing on disk (for scale)", ...pair(lock, ["peerPostgres", "peerMysql"]), "—"],
      ["hand-over (release → waiter holds), median", ...pair(handover, ["postgres", "mysql"]), fmt(zkHandover?.simba, zkHandover?.unit ?? "")],
      [
        "hand-over floor: a durable `UPDATE` + `pg_notify` heard (PostgreSQL); raw delete → watch → create (ZooKeeper)",
        fmt(handoverFloor?.postgres, handoverFloor?.unit ?? ""),
        "— (no push: a poll every 60 ms)",
        fmt(zkHandover?.floor, zkHandover?.unit ?? "")
      ],
      [
        "the same `UPDATE` + `pg_notify` without the flush, as Simba's release commits (PostgreSQL)",
        fmt(handoverUnflushed?.postgres, handoverUnflushed?.unit ?? ""),
        "—",
        "—"
      ],
      [
        "renewal round trips per renew interval, 1,000 leases held",
        ...pair(renew, ["postgres", "mysql"]),
        isNumber(zkRenew?.simba) && isNumber(zkCadence?.simba)
          ? `${fmt(zkRenew.simba, "")} per renewal, ${fmt(zkCadence.simba, "")} renewals (5/12 of the session timeout)`
          : "—"
      ],
      [
        "failover (holder frozen or killed → waiter holds), worst; lease 2 s (SQL), session timeout 3 s (ZooKeeper)",
        ...pair(failover, ["postgres", "mysql"]),
        fmt(zkFailover?.simba, zkFailover?.unit ?? "")
      ]
    ]
  )
}

const clientTable = (rows: ReadonlyArray<RedisRow>): string => {
  const r = (bench: string, metric: RegExp) => find(rows, bench, metric)
  const cell = (row: RedisRow | undefined) => fmt(row?.simba, row?.unit ?? "")
  const lines: ReadonlyArray<readonly [string, RedisRow | undefined]> = [
    ["heap per idle election, leader", r("engine", /^heap per idle election, leader/)],
    ["heap per idle election, waiting candidate", r("engine", /^heap per idle election, waiting candidate/)],
    ["`Engine.step` events/s, 10 elections in the state", r("engine", /^Engine\.step events\/s, 10 elections/)],
    ["`Engine.step` events/s, 10,000 elections, as a share of the rate with 10", r("engine", /^Engine\.step events\/s, 10,000 elections \/ 10/)],
    ["a client holding 10,000 locks (single Redis): renewal round trip, median", r("renew10k", /^keepAlive round trip, median \(single node, 10,000 locks/)],
    ["the same: Redis round trips per renewal", r("renew10k", /^Redis round trips per renewal \(single node, 10,000 locks\)/)],
    ["the same on a Redis Cluster: round trips per renewal (one per node, all at once)", r("renew10k", /^Redis round trips per renewal \(Cluster, 10,000 locks\)/)],
    ["the same on a Redis Cluster: renewal round trip, median", r("renew10k", /^keepAlive round trip, median \(Cluster, 10,000 locks/)],
    ["the same on a Redis Cluster: process CPU per renewal, median 1 s slice", r("renew10k", /^process CPU per renewal, idle elections included, median 1 s slice \(Cluster, 10,000 locks\)/)],
    ["a Redis Cluster client in a partition group of 10,000: round trips per renewal", r("renew10k", /^Redis round trips per renewal \(Cluster, 10,000 partitions/)]
  ]
  return table(["", "Simba"], lines.map(([label, row]) => [label, cell(row)]))
}

/** Lock caching (`keep`): one name again and again, on every store that keeps blocks, and a second client asking. */
const cachedTable = (redis: ReadonlyArray<RedisRow>, sql: ReadonlyArray<SqlRow>): string => {
  const r = (metric: RegExp) => find(redis, "cached", metric)
  const s = (metric: RegExp) => find(sql, "sql uncontended", metric)
  const cell = (value: number | null | undefined, unit: string | undefined) => fmt(value, unit ?? "")
  const sameName = r(/^keep: one name taken again and again by one client, median/)
  const cpu = r(/^keep: process CPU time per body/)
  const trips = r(/^keep: round trips per body/)
  const memory = r(/^keep on the in-memory store: one name taken again and again, median/)
  const memoryCpu = r(/^keep on the in-memory store: process CPU/)
  const asked = r(/^keep: a second client asks/)
  const bodyToBody = r(/^keep: the holder's body ends/)
  const sqlSame = s(/^withLock with keep: one name taken again and again, median/)
  const sqlCpu = s(/^withLock with keep: process CPU time per body/)
  const peerBest = (row: RedisRow | undefined) => {
    const peers = [row?.redlock, row?.redisSemaphore].filter(isNumber)
    return peers.length === 0 ? undefined : Math.min(...peers)
  }
  return table(
    ["", "Simba with `keep`", "without (the faster peer; SQL: a raw advisory-lock pair)", "ratio"],
    [
      ["Redis: one name taken again and again by one client, median", cell(sameName?.simba, sameName?.unit), cell(peerBest(sameName), sameName?.unit), ratio(sameName?.simba, peerBest(sameName))],
      ["Redis: process CPU per body", cell(cpu?.simba, cpu?.unit), cell(peerBest(cpu), cpu?.unit), ratio(cpu?.simba, peerBest(cpu))],
      ["Redis: round trips per body", cell(trips?.simba, trips?.unit), cell(peerBest(trips), trips?.unit), ratio(trips?.simba, peerBest(trips))],
      ["in memory: one name again and again, median (CPU per body)", `${cell(memory?.simba, memory?.unit)} (${cell(memoryCpu?.simba, memoryCpu?.unit)})`, "—", "—"],
      ["PostgreSQL: one name again and again, median (CPU per body)", `${cell(sqlSame?.postgres, sqlSame?.unit)} (${cell(sqlCpu?.postgres, sqlCpu?.unit)})`, cell(sqlSame?.peerPostgres, sqlSame?.unit), ratio(sqlSame?.postgres, sqlSame?.peerPostgres ?? undefined)],
      ["MySQL/MariaDB: one name again and again, median (CPU per body)", `${cell(sqlSame?.mysql, sqlSame?.unit)} (${cell(sqlCpu?.mysql, sqlCpu?.unit)})`, cell(sqlSame?.peerMysql, sqlSame?.unit), ratio(sqlSame?.mysql, sqlSame?.peerMysql ?? undefined)],
      ["Redis: a second client asks for a cached lease (no body runs): ask → its body starts, median", cell(asked?.simba, asked?.unit), "—", "—"],
      ["Redis: the holder's body ends while a second client waits → its body starts, median", cell(bodyToBody?.simba, bodyToBody?.unit), "—", "—"]
    ]
  )
}

/** Semaphores and read-write locks on Redis beside redis-semaphore's `Semaphore` and `MultiSemaphore`. */
const holdsTable = (redis: ReadonlyArray<RedisRow>): string => {
  const r = (metric: RegExp) => find(redis, "holds", metric)
  const cell = (row: RedisRow | undefined, key: "simba" | "redisSemaphore") => fmt(row?.[key], row?.unit ?? "")
  const pair = (label: string, row: RedisRow | undefined, target: string) =>
    [label, cell(row, "simba"), cell(row, "redisSemaphore"), ratio(row?.simba, row?.redisSemaphore ?? undefined), target]
  const uSem = r(/^uncontended acquire \+ release of 1 of 3 permits, median of 2,000 \(peer: Semaphore\)/)
  const uMulti = r(/^uncontended acquire \+ release of 1 of 3 permits, median of 2,000 \(peer: MultiSemaphore/)
  const uLock = r(/^uncontended withLock on the same client and run/)
  const lockRatio = uLock?.simba !== undefined && uLock?.simba !== null && uSem?.redisSemaphore !== undefined && uSem?.redisSemaphore !== null
    ? ratio(uLock.simba, uSem.redisSemaphore)
    : "—"
  const only = (label: string, row: RedisRow | undefined, target: string) => [label, cell(row, "simba"), "—", "—", target]
  return table(
    ["", "Simba", "redis-semaphore `Semaphore`", "ratio", "target"],
    [
      pair("uncontended acquire + release of 1 of 3 permits, median", uSem, `within withLock's ratio (${lockRatio} this run)`),
      ["the same, `MultiSemaphore` (1 permit)", "—", cell(uMulti, "redisSemaphore"), ratio(uSem?.simba, uMulti?.redisSemaphore ?? undefined), ""],
      pair("process CPU per uncontended acquire + release", r(/^process CPU per uncontended acquire \+ release of a permit \(peer: Semaphore\)/), ""),
      pair("round trips per uncontended acquire + release", r(/^round trips per uncontended acquire \+ release of a permit \(peer: Semaphore\)/), ""),
      pair("8 contenders on 3 permits: sections/s", r(/^8 contenders on 3 permits, sections\/s \(peer: Semaphore\)/), ">= 0.9x"),
      pair("8 contenders on 3 permits: fairness (Jain's index)", r(/^8 contenders on 3 permits, fairness \(Jain\) \(peer: Semaphore\)/), ">= 0.99"),
      pair("8 contenders on 3 permits: longest wait", r(/^8 contenders on 3 permits, longest wait \(peer: Semaphore\)/), "< 100 ms"),
      pair("8 contenders on 3 permits: waiter round trips per section", r(/^8 contenders on 3 permits, waiter round trips per section \(peer: Semaphore\)/), ""),
      pair("the same against `MultiSemaphore`: sections/s", r(/^8 contenders on 3 permits, sections\/s \(peer: MultiSemaphore\)/), ">= 0.9x"),
      pair("the same against `MultiSemaphore`: longest wait", r(/^8 contenders on 3 permits, longest wait \(peer: MultiSemaphore\)/), "< 100 ms"),
      only("read-write lock, 6 readers + 2 writers: reads/s", r(/^read-write lock, 6 readers \+ 2 writers: reads\/s/), ""),
      only("read-write lock, 6 readers + 2 writers: writes/s", r(/^read-write lock, 6 readers \+ 2 writers: writes\/s/), ""),
      only("read-write lock: a writer's longest wait, readers arriving continuously", r(/^read-write lock, 6 readers \+ 2 writers: a writer's longest wait/), "< 100 ms"),
      only("read-write lock: a writer's median wait", r(/^read-write lock, 6 readers \+ 2 writers: a writer's median wait/), "")
    ]
  )
}

// -------------------------------------------------------------------------------------------------
// The page
// -------------------------------------------------------------------------------------------------

/** How many of the recorded runs the targets table shows (the newest). */
const SHOWN_RUNS = 5

const verdictMark = (met: boolean | null | undefined): string => (met === true ? " ✓" : met === false ? " ✗" : "")

/**
 * Each issue's targets over the last recorded full runs (`bench/history.json`, see `targets.ts`):
 * the figure of each run with its verdict, and in how many of them the target was met.
 */
const targetsTable = (history: ReadonlyArray<RunRecord>): string => {
  const runs = history.slice(-SHOWN_RUNS)
  if (runs.length === 0) return "No full run recorded yet: \`npm run bench\` records one in \`bench/history.json\`."
  const cell = (target: Target, run: RunRecord): string => {
    const entry = run.values[target.label]
    return entry === undefined || entry.value === null ? "—" : `${fmt(entry.value, target.unit)}${verdictMark(entry.met)}`
  }
  const metIn = (target: Target): string => {
    const verdicts = runs.map((run) => run.values[target.label]?.met).filter((met) => typeof met === "boolean")
    return verdicts.length === 0 ? "—" : `${verdicts.filter((met) => met).length} of ${verdicts.length}`
  }
  return table(
    ["target", "issue", "goal", ...runs.map((run) => run.at.slice(0, 16).replace("T", " ")), "met in"],
    targets.map((target) => [target.label, `#${target.issue}`, target.goal, ...runs.map((run) => cell(target, run)), metIn(target)])
  )
}

export const render = (
  redis: ReadonlyArray<RedisRow>,
  sql: ReadonlyArray<SqlRow>,
  zk: ReadonlyArray<ZkRow>,
  history: ReadonlyArray<RunRecord> = readHistory()
): string =>
  `<!-- Generated by bench/report.ts from bench/results*.json: edit the template there, not this file. -->
# Performance

What Simba costs on each backend, measured by \`npm run bench\` beside the Redis locks most
applications would otherwise use: \`@sesamecare-oss/redlock\` and \`redis-semaphore\` (\`Mutex\`), each
at its defaults unless a row says "tuned". The figures below are from the last full run whose results
files are in the repository (\`bench/results.json\`, \`bench/results-sql.json\`,
\`bench/results-zookeeper.json\`).

## Running the bench

\`\`\`sh
npm run bench                 # every section; writes the three results files and this page
npm run bench:report          # this page again from the results files, without measuring
node --import tsx --import ./bench/built.mjs bench/run.ts --only contended   # one Redis section, no files written
\`\`\`

\`npm run bench\` starts the servers it needs (\`scripts/services.sh\`: Redis, the Redis Cluster,
PostgreSQL, MariaDB, ZooKeeper), builds the package and measures \`dist/\`, the code users install.
It takes several minutes and keeps a core busy; run it on an otherwise idle machine. \`--only\` takes
\`uncontended\`, \`contended\`, \`handover\`, \`renew10k\`, \`cached\`, \`holds\` or \`engine\` (the last needs no server);
\`bench/zookeeper.ts\` and \`bench/sql.ts\` run alone the same way. Every uncontended series is timed
after 4,000 warm-up runs, so the code on the path is optimized, as in a service that takes locks all
day.

## Reading the figures

- **Compare ratios within one run, not figures across runs.** A machine's speed drifts within
  minutes, and the peers' cost is mostly round trips while Simba's is mostly its own CPU, so the
  absolute figures move between runs more than the ratios do. To judge a change to the client, run
  both builds in one process, alternating, rather than comparing two bench runs.
- **"Simba ÷ the better peer"** divides Simba's figure by the better of the two peers' (the lower
  one where lower is better, the higher one where higher is better): above 1 on a "lower" row, Simba
  costs more; below 1 on a "higher" row, it does less. In the floors table, "Simba ÷ floor" is how far
  Simba's figure is from what the floor costs (on a throughput row, below 1 is fewer sections).
- **Contended** rows run 8 contenders on one name, each holding the lock for ~1 ms. Simba hands the
  lock over in FIFO order (a fairness of 1.000, waits of a few sections); the peers let the releasing
  contender take the lock straight back, which gives more sections per second and waits of seconds.
- **Hand-over** is from the holder's release to the waiting client holding the lock, after 10–40 ms of
  idle. Simba's waiter is told by the release itself; the peers' waiters poll (tuned: more often).
- **Renewal**: Simba renews one session per client, whatever the number of leases it holds; the
  peers refresh each lock on its own.
- **Floors** are what the same work costs with less of Simba: the network alone, Simba's own scripts
  with no client (floor 1: the price of its rules in the store), and the client's prescribed shape
  with no engine (floor 2: one loop fiber, a fiber per backend call and per body). The distance from a
  floor to Simba's figure is what the parts above it add. The harnesses are in \`bench/floors/\`.
- **Server time** is what Redis itself spends in a lock's commands (\`INFO commandstats\`: its scripts
  with the commands they run, and the plain commands a peer sends), without the network. Simba's
  scripts keep sessions, a FIFO queue, hand-off, holder records, versions and the lock-delay, so they
  cost the server several times a peer's \`SET NX\`; on a machine where the client and Redis share
  the cores, that time also grows with the client's CPU. With the client's own cost taken away, one
  awaited round trip plus that server time is the least Simba's \`withLock\` can cost (a floor row).

## The targets over the last full runs

The issues' performance targets, each judged in every full run that \`npm run bench\` recorded
(\`bench/history.json\`, the newest ${SHOWN_RUNS} shown; UTC times): one run is not enough to judge a
target, since the machine's speed drifts between runs. ✓ met, ✗ missed. The tables below are the
newest run's figures.

${targetsTable(history)}

## Redis: Simba beside redlock and redis-semaphore

${peersTable(redis)}

## Redis: the floors under Simba's figures

${floorsTable(redis)}

## The other backends

On MySQL/MariaDB every grant and release is a durable commit (the price of tokens that survive a
database crash; the flush setting is server-wide), not an advisory lock. PostgreSQL commits without
the flush and keeps the same safety with the clock floor and the lock-delay
([sql.md](sql.md#commits-without-a-flush)). \`withLock\` does not wait for its release, so back to
back its acquire commits while the last release commits: its floor is one commit sent right behind
another on a second connection (durable on MySQL/MariaDB), not two in a row. What lies between that
floor and \`withLock\` is the routines' own statements and the client.

${backendsTable(sql, zk)}

## Lock caching

A lock with \`keep\` ([locks.md](locks.md#lock-caching-keep)) keeps its lease after the body, so a client that takes
one name again and again runs its bodies without a round trip, each with its own term and fencing
token from the block its grant reserved. ZooKeeper cannot reserve blocks, so it has no row here.

${cachedTable(redis, sql)}

## Semaphores and read-write locks

Simba's semaphore (\`withPermits\`, 1 of 3 permits) beside \`redis-semaphore\`'s \`Semaphore\` and
\`MultiSemaphore\` on the same Redis, at their defaults (\`retryInterval\` 10 ms) with \`lockTimeout\`
3 s; contended: 8 contenders (8 clients, 8 connections, one process), 1 ms of work each, for 10 s.
The read-write lock has no peer here (redis-semaphore has none): 6 readers and 2 writers, each its
own client, a writer pausing 5 ms between its writes. \`--only holds\` runs this section alone.

${holdsTable(redis)}

## The client

${clientTable(redis)}
`

/** One target's figure and verdict in a line, as the bench prints them. */
export const targetLine = (
  target: Target,
  { met, value }: { readonly value: number | null | undefined; readonly met: boolean | null | undefined }
): string =>
  `#${target.issue} ${target.label} (${target.goal}): ${isNumber(value) ? fmt(value, target.unit) : "—"} → ` +
  (met === true ? "met" : met === false ? "MISSED" : "no figure")

/**
 * Writes docs/performance.md from the results files. `runStartedAt` (ms since the epoch): a full run
 * has just written them, and its targets are recorded in \`bench/history.json\` first.
 */
export const main = async (
  log: (line: string) => void = (line) => process.stderr.write(`bench: ${line}\n`),
  runStartedAt?: number
) => {
  const results: Results = {
    redis: read<RedisRow>("./results.json"),
    sql: read<SqlRow>("./results-sql.json"),
    zk: read<ZkRow>("./results-zookeeper.json")
  }
  if (runStartedAt !== undefined) {
    const run = record(results, new Date(runStartedAt))
    const met = targets.filter((target) => run.values[target.label]?.met === true).length
    log(`recorded the run's targets in bench/history.json: ${met} of ${targets.length} met`)
    for (const target of targets) log(`  ${targetLine(target, run.values[target.label] ?? { value: null, met: null })}`)
  }
  const out = here("../docs/performance.md")
  writeFileSync(out, render(results.redis, results.sql, results.zk))
  log(`wrote ${out}`)
}

if (process.argv[1] === fileURLToPath(import.meta.url)) {
  main().catch((error: unknown) => {
    console.error(error)
    process.exitCode = 1
  })
}
