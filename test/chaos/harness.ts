/**
 * The chaos suite's engine: three processes of test/chaos/leader.ts per backend, faults in bounded
 * loops, and the checks on what the processes reported (all times on the machine's shared
 * CLOCK_MONOTONIC, see leader.ts):
 *
 * - overlaps: a term's work is the span from its first to its last write attempt that passed
 *   `term.ensureValid()`; two different terms' spans must not intersect;
 * - stale writes: a fenced write accepted after another write with a higher token had been
 *   acknowledged (its `at` later than the other's `end`) must not exist;
 * - tokens: terms that start later carry larger tokens;
 * - liveness: after each fault heals, a new term starts within `bound` (the lease arithmetic:
 *   leaseDuration for the server to expire the lost session, + renewInterval for a candidate's next
 *   try, + 1 s of slack for a loaded 2-core machine).
 */
import { Cluster, Redis } from "ioredis"
import { randomBytes } from "node:crypto"
import { type Line, monotonicMs, processes, sleep } from "../support/processes.js"
import { type Proxy, startProxy } from "../support/proxy.js"
import { awaitClusterReady, type PrivateRedis, startPrivateCluster, startPrivateRedis } from "../support/redisServer.js"
import { type PrivateSqlServer, privateMariadb, privatePostgres } from "../support/sqlServer.js"

export type Backend = "redis" | "cluster" | "pg" | "mysql" | "zookeeper"
export type Fault =
  | "kill -9 leader"
  | "SIGSTOP leader"
  | "blackhole leader"
  | "connection kill"
  | "SIGSTOP server"
  | "restart, persistence"
  | "restart, no persistence"
  | "FLUSHALL"
  | "lease hash deleted"
  | "crash restart"
  | "master restart, no persistence"
  | "allkeys-lru"
  | "volatile-lru"

export const leaseDuration = 2000
export const renewInterval = Math.round(leaseDuration / 3)
const slack = 1000
/** Longest time from a fault's heal to the next term's start. */
export const boundOf = (fault: Fault): number =>
  leaseDuration + renewInterval + slack +
  // Redis grants nothing for one lease after it finds its state lost (the lock-delay), PostgreSQL
  // after a crash (its commits do not wait for the flush; MariaDB's do, it needs no delay).
  (wipes.includes(fault) ? leaseDuration : 0)

/** Faults that lose the store's state (or, on PostgreSQL, commits): the backend's lock-delay follows. */
const wipes: ReadonlyArray<Fault> = ["restart, no persistence", "FLUSHALL", "crash restart", "master restart, no persistence"]

/** Faults on the store's state (the victim keeps writing at first: its loss shows at a renewal or a candidate's retry). */
const stateFaults: ReadonlyArray<Fault> = [...wipes, "lease hash deleted"]

/** The faults each backend can take here (server faults only on servers of our own). */
export const faultsOf = (backend: Backend): ReadonlyArray<Fault> => {
  const processFaults: Array<Fault> = ["kill -9 leader", "SIGSTOP leader"]
  // The shared cluster: faults on our own keys only; a master restarted: a private cluster.
  if (backend === "cluster") return [...processFaults, "lease hash deleted", "master restart, no persistence"]
  const pathFaults: Array<Fault> = [...processFaults, "blackhole leader", "connection kill"]
  // A private database server (test/support/sqlServer.ts), crashed and started again.
  if (backend === "pg" || backend === "mysql") return [...pathFaults, "crash restart"]
  if (backend !== "redis") return pathFaults
  return [
    ...pathFaults,
    "SIGSTOP server",
    "restart, persistence",
    "restart, no persistence",
    "FLUSHALL",
    "lease hash deleted",
    ...evictionFaults
  ]
}

/**
 * A server that may evict keys (issue 12: sessions, lease hashes and queues evicted under memory
 * pressure): not a fault injected into a running election but a server the processes start on,
 * which they must refuse (`EvictionPolicyError`), so nobody leads there.
 */
const evictionFaults: ReadonlyArray<Fault> = ["allkeys-lru", "volatile-lru"]

export interface Row {
  readonly backend: Backend
  readonly fault: Fault
  readonly rounds: number
  /** Fault to the next term's start, the worst round (ms). */
  readonly failover: number
  /** Fault to the victim's last write attempt that passed ensureValid, the worst round (ms). */
  readonly workStopped: number
  /** The least gap between the victim's last valid write attempt and the next term's first (ms). */
  readonly gap: number
  readonly overlaps: number
  readonly staleAccepted: number
  readonly refused: number
  readonly tokenRegressions: number
  /** Rounds where no leader came back within the bound. */
  readonly late: number
  /** What else the round showed (the eviction faults: how many processes refused to start, and why). */
  readonly notes: string
}

interface Write {
  readonly tok: bigint
  readonly pid: number
  readonly at: number
  readonly end: number
  readonly r: string
}

interface TermSpan {
  readonly key: string
  readonly tok: bigint
  readonly pid: number
  readonly start: number
  first: number
  last: number
}

const num = (line: Line, field: string) => Number(line.json?.[field])

export const run = async (
  backend: Backend,
  wanted: ReadonlyArray<{ readonly fault: Fault; readonly rounds: number }>,
  log: (text: string) => void = () => {},
  /** `lockKeep`: the processes take a lock with this `keep` again and again (leader.ts, CHAOS_LOCK_KEEP). */
  options: { readonly lockKeep?: string | undefined } = {}
): Promise<ReadonlyArray<Row>> => {
  let plan = wanted
  const suffix = randomBytes(5).toString("hex")
  const children = processes()
  const { lines } = children
  const proxies: Array<Proxy> = []
  const proxyOf = new Map<number, Proxy>()
  const servers: Array<PrivateRedis> = []
  let server: PrivateRedis | undefined
  let sqlServer: PrivateSqlServer | undefined
  try {
    // The fenced store: never faulted.
    let fenceEnv: Record<string, string>
    if (backend === "pg" || backend === "mysql") {
      fenceEnv = { CHAOS_FENCE: "sql", CHAOS_FENCE_PG_URL: "postgres://postgres@127.0.0.1:5432/test" }
    } else {
      const fence = await startPrivateRedis()
      servers.push(fence)
      fenceEnv = { CHAOS_FENCE: "redis", CHAOS_FENCE_REDIS_URL: `redis://127.0.0.1:${fence.port}` }
    }
    // Servers that may evict: every process must refuse to start, and none leads.
    const evictionRows: Array<Row> = []
    /** The processes that were to refuse to start (their `fatal` is expected). */
    const refusing = new Set<number>()
    for (const { fault, rounds: count } of plan.filter((p) => evictionFaults.includes(p.fault))) {
      for (let round = 0; round < count; round++) {
        const evicting = await startPrivateRedis(["--maxmemory", "64mb", "--maxmemory-policy", fault])
        servers.push(evicting)
        const env = {
          ...fenceEnv,
          CHAOS_NAME: `chaos-${suffix}`,
          CHAOS_FENCE_KEY: `simba-chaos:${backend}:${suffix}`,
          SIMBA_LEASE_DURATION: `${leaseDuration}ms`,
          SIMBA_REDIS_URL: `redis://127.0.0.1:${evicting.port}`,
          SIMBA_REDIS_KEY_PREFIX: "simba-chaos"
        }
        const pids = new Set<number>()
        for (let i = 0; i < 3; i++) pids.add(children.spawnScript("test/chaos/leader.ts", { args: [backend], env }).pid!)
        for (const pid of pids) refusing.add(pid)
        const mine = () => lines.filter((l) => pids.has(l.pid))
        await children.waitFor(`three processes on a ${fault} server exit`, () =>
          !children.alive().some((c) => pids.has(c.pid!)), 60_000)
        const refusals = mine().filter((l) => l.json?.ev === "fatal" && String(l.json.message).includes("EvictionPolicyError"))
        // Any term on such a server is a failure (its keys may go): counted as overlaps, which must be 0.
        const leaders = mine().filter((l) => l.json?.ev === "start").length
        const writes = mine().filter((l) => l.json?.ev === "w")
        evictionRows.push({
          backend, fault, rounds: 1, failover: -Infinity, workStopped: 0, gap: Infinity, overlaps: leaders,
          staleAccepted: 0, refused: writes.filter((w) => w.json?.r === "refused").length, tokenRegressions: 0,
          late: 0,
          notes: `${refusals.length}/3 processes refused to start (EvictionPolicyError), ${leaders} leaders, ${writes.length} writes`
        })
        log(`${backend}: ${fault} round ${round + 1} done`)
      }
    }
    plan = plan.filter((p) => !evictionFaults.includes(p.fault))
    if (plan.length === 0) return evictionRows

    let target = 0
    // The cluster the processes use: the shared one, or a private one of three masters to restart.
    let clusterPorts: ReadonlyArray<number> = [7000, 7001, 7002]
    if (backend === "cluster" && plan.some((p) => p.fault === "master restart, no persistence")) {
      const masters = await startPrivateCluster(3)
      servers.push(...masters)
      clusterPorts = masters.map((m) => m.port)
    }
    const withCluster = async <A>(f: (cluster: Cluster) => Promise<A>): Promise<A> => {
      const cluster = new Cluster(clusterPorts.map((port) => ({ host: "127.0.0.1", port })), {
        redisOptions: { maxRetriesPerRequest: 1 }
      })
      try {
        return await f(cluster)
      } finally {
        cluster.disconnect()
      }
    }
    const leaseKey = `simba-chaos-${suffix}:lease:{chaos-${suffix}}`
    if (backend === "redis") {
      server = await startPrivateRedis()
      servers.push(server)
      target = server.port
    } else if ((backend === "pg" || backend === "mysql") && plan.some((p) => p.fault === "crash restart")) {
      // The leases on a server of the run's own, which it may crash; the fenced log stays on the shared one.
      sqlServer = backend === "pg" ? privatePostgres() : privateMariadb()
      await sqlServer.setUp()
      target = sqlServer.port()
    } else if (backend === "pg") target = 5432
    else if (backend === "mysql") target = 3306
    else if (backend === "zookeeper") target = 2181
    // The private PostgreSQL has only its `postgres` database; the private MariaDB has `test` too.
    const database = backend === "pg" && sqlServer !== undefined ? "postgres" : "test"

    const spawnOne = async () => {
      const env: Record<string, string> = {
        ...fenceEnv,
        CHAOS_NAME: `chaos-${suffix}`,
        CHAOS_FENCE_KEY: `simba-chaos:${backend}:${suffix}`,
        WRITE_EVERY_MS: "20",
        ...(options.lockKeep === undefined ? {} : { CHAOS_LOCK_KEEP: options.lockKeep }),
        SIMBA_LEASE_DURATION: `${leaseDuration}ms`,
        // The Redis lock-delay after lost state, and PostgreSQL's after a crash: the lease duration
        // (what boundOf adds for a wipe or a crash).
        SIMBA_REDIS_LOCK_DELAY: `${leaseDuration} millis`,
        SIMBA_PG_LOCK_DELAY: `${leaseDuration} millis`
      }
      let proxy: Proxy | undefined
      if (backend !== "cluster") {
        proxy = await startProxy(target)
        proxies.push(proxy)
      }
      const port = proxy?.port ?? 0
      if (backend === "redis") Object.assign(env, { SIMBA_REDIS_URL: `redis://127.0.0.1:${port}`, SIMBA_REDIS_KEY_PREFIX: "simba-chaos" })
      if (backend === "cluster") {
        Object.assign(env, {
          SIMBA_REDIS_CLUSTER: clusterPorts.map((port) => `127.0.0.1:${port}`).join(","),
          SIMBA_REDIS_KEY_PREFIX: `simba-chaos-${suffix}`
        })
      }
      if (backend === "pg") {
        Object.assign(env, { SIMBA_PG_URL: `postgres://postgres@127.0.0.1:${port}/${database}`, SIMBA_PG_TABLE_PREFIX: "simba_chaos_" })
      }
      if (backend === "mysql") {
        Object.assign(env, { SIMBA_MYSQL_URL: `mysql://root@127.0.0.1:${port}/${database}`, SIMBA_MYSQL_TABLE_PREFIX: "simba_chaos_" })
      }
      if (backend === "zookeeper") Object.assign(env, { SIMBA_ZK_CONNECT: `127.0.0.1:${port}`, SIMBA_ZK_ROOT: "/simba-test" })
      const child = children.spawnScript("test/chaos/leader.ts", { args: [backend], env })
      if (proxy !== undefined) proxyOf.set(child.pid!, proxy)
      return child
    }

    const events = (ev: string) => lines.filter((l) => l.json?.ev === ev)
    const fatal = () => events("fatal").filter((l) => !refusing.has(l.pid))
    for (let i = 0; i < 3; i++) await spawnOne()
    await children.waitFor("three chaos processes ready", () => {
      if (fatal().length > 0) throw new Error(`a chaos process failed: ${fatal()[0]!.text}`)
      return events("ready").length >= 3
    }, 60_000)

    /** The process whose latest term has started and not ended, with an accepted write since `after`. */
    const leader = (after: number): number | undefined => {
      const open = new Map<number, string>()
      for (const l of lines) {
        if (l.json?.ev === "start") open.set(l.pid, String(l.json.tok))
        if (l.json?.ev === "end") open.delete(l.pid)
      }
      for (const [pid, tok] of open) {
        if (children.alive().some((c) => c.pid === pid) &&
            lines.some((l) => l.pid === pid && l.json?.ev === "w" && l.json.tok === tok && l.json.r === "ok" && num(l, "at") > after)) {
          return pid
        }
      }
      return undefined
    }

    const rounds: Array<Round> = []
    for (const { fault, rounds: count } of plan) {
      for (let round = 0; round < count; round++) {
        const settledFrom = monotonicMs()
        await children.waitFor(`a leader writing before ${fault}`, () => leader(settledFrom) !== undefined, 30_000)
        await sleep(300)
        // Leadership may have moved meanwhile (locks taken again and again hand the lease on between
        // bodies): the victim is whoever leads now.
        await children.waitFor(`a leader to fault (${fault})`, () => leader(settledFrom) !== undefined, 30_000)
        const victim = leader(settledFrom)!
        const faultAt = monotonicMs()
        let healAt = faultAt
        const past = leaseDuration + 1000
        switch (fault) {
          case "kill -9 leader":
            children.signal(victim, "SIGKILL")
            await spawnOne()
            break
          case "SIGSTOP leader":
            children.signal(victim, "SIGSTOP")
            await sleep(past)
            children.signal(victim, "SIGCONT")
            break
          case "blackhole leader":
            proxyOf.get(victim)!.blackhole()
            await sleep(past)
            proxyOf.get(victim)!.heal()
            healAt = monotonicMs()
            break
          case "connection kill":
            proxyOf.get(victim)!.reset()
            break
          case "SIGSTOP server":
            server!.signal("SIGSTOP")
            await sleep(past)
            server!.signal("SIGCONT")
            healAt = monotonicMs()
            break
          case "restart, persistence":
          case "restart, no persistence": {
            const persist = fault === "restart, persistence"
            if (persist) {
              await withRedis(server!.port, (r) => r.config("SET", "appendonly", "yes"))
              await sleep(300)
            }
            await server!.kill()
            await server!.start(persist ? ["--appendonly", "yes", "--appendfsync", "always"] : [])
            healAt = monotonicMs()
            break
          }
          case "FLUSHALL":
            await withRedis(server!.port, (r) => r.flushall())
            break
          case "crash restart":
            // Down for longer than a lease: the leader's term ends at its deadline, and after the
            // restart PostgreSQL grants nothing for its lock-delay (MariaDB at once).
            sqlServer!.crash()
            await sleep(past)
            await sqlServer!.start()
            healAt = monotonicMs()
            break
          case "master restart, no persistence": {
            // The master serving the lease's slot, killed and started again: the same node and
            // slots, no keys (its leases, the shadows there, its boot markers).
            const slot = Number(await withCluster((c) => c.call("CLUSTER", "KEYSLOT", leaseKey)))
            const owner = await withCluster(async (c) => {
              await c.ping()
              return c.slots[slot]?.[0]
            })
            const master = servers.find((m) => owner === `127.0.0.1:${m.port}`)
            if (master === undefined) throw new Error(`no private master serves slot ${slot} (${owner})`)
            await master.kill()
            await master.start()
            await awaitClusterReady(clusterPorts)
            healAt = monotonicMs()
            break
          }
          case "lease hash deleted":
            if (backend === "cluster") await withCluster((c) => c.del(leaseKey))
            else await withRedis(server!.port, (r) => r.del(`simba-chaos:lease:{chaos-${suffix}}`))
            break
        }
        // A leader writing again (a new term, or the same one when it kept its lease), within the bound.
        const backAt = await children.waitFor(`a leader after ${fault}`, () => leader(healAt) !== undefined, boundOf(fault) + 10_000)
          .then(() => monotonicMs(), () => Infinity)
        // Faults on the store's state take effect later, through renewals and the candidates' retries
        // (a HeldBy's remaining, about a lease): keep watching for as long as they can, so an overlap
        // they cause falls inside this round.
        if (stateFaults.includes(fault)) await sleep(Math.max(0, healAt + boundOf(fault) - monotonicMs()))
        rounds.push({ fault, victim, faultAt, healAt, backAt })
        log(`${backend}: ${fault} round ${round + 1} done`)
      }
    }
    await sleep(500)
    await children.stopAll()
    return [...analyse(backend, lines, rounds), ...evictionRows]
  } finally {
    await children.stopAll()
    for (const proxy of proxies) await proxy.close()
    for (const s of servers) await s.stop()
    sqlServer?.tearDown()
  }
}

const withRedis = async <A>(port: number, f: (redis: Redis) => Promise<A>): Promise<A> => {
  const redis = new Redis(port, "127.0.0.1", { maxRetriesPerRequest: 1 })
  try {
    return await f(redis)
  } finally {
    redis.disconnect()
  }
}

interface Round {
  readonly fault: Fault
  readonly victim: number
  readonly faultAt: number
  readonly healAt: number
  /** When a leader was seen writing again after the heal (Infinity: never within the wait). */
  readonly backAt: number
}

const analyse = (
  backend: Backend,
  lines: ReadonlyArray<Line>,
  rounds: ReadonlyArray<Round>
): ReadonlyArray<Row> => {
  const writes: Array<Write> = lines.filter((l) => l.json?.ev === "w").map((l) => ({
    tok: BigInt(String(l.json!.tok)),
    pid: l.pid,
    at: num(l, "at"),
    end: num(l, "end"),
    r: String(l.json!.r)
  }))
  const spans = new Map<string, TermSpan>()
  for (const l of lines.filter((l) => l.json?.ev === "start")) {
    const key = `${l.pid}:${l.json!.tok}`
    spans.set(key, { key, tok: BigInt(String(l.json!.tok)), pid: l.pid, start: num(l, "mono"), first: Infinity, last: -Infinity })
  }
  for (const w of writes) {
    if (w.r === "expired") continue
    const span = spans.get(`${w.pid}:${w.tok}`)
    if (span === undefined) continue
    span.first = Math.min(span.first, w.at)
    span.last = Math.max(span.last, w.at)
  }
  const worked = [...spans.values()].filter((s) => s.first <= s.last).sort((a, b) => a.first - b.first)
  const starts = [...spans.values()].sort((a, b) => a.start - b.start)

  // Overlaps: pairs of terms whose work spans intersect; attributed to the round they fall in.
  const overlapAt: Array<number> = []
  for (let i = 0; i < worked.length; i++) {
    for (let j = i + 1; j < worked.length; j++) {
      if (worked[j]!.first <= worked[i]!.last && worked[j]!.tok !== worked[i]!.tok) overlapAt.push(worked[j]!.first)
    }
  }
  // Stale accepted: an accepted write that began after a higher token's write was acknowledged.
  const accepted = writes.filter((w) => w.r === "ok").sort((a, b) => a.end - b.end)
  const staleAt: Array<number> = []
  let highest = { tok: 0n, end: -Infinity }
  const byStart = [...accepted].sort((a, b) => a.at - b.at)
  let k = 0
  for (const w of byStart) {
    while (k < accepted.length && accepted[k]!.end < w.at) {
      if (accepted[k]!.tok > highest.tok) highest = { tok: accepted[k]!.tok, end: accepted[k]!.end }
      k++
    }
    if (w.tok < highest.tok) staleAt.push(w.at)
  }
  // Every start line, not one per token: a term that starts with the token of an earlier one is one.
  const allStarts = lines.filter((l) => l.json?.ev === "start")
    .map((l) => ({ tok: BigInt(String(l.json!.tok)), start: num(l, "mono") }))
    .sort((a, b) => a.start - b.start)
  const regressionAt: Array<number> = []
  let highestStarted = 0n
  for (const s of allStarts) {
    if (s.tok <= highestStarted) regressionAt.push(s.start)
    if (s.tok > highestStarted) highestStarted = s.tok
  }

  const rows: Array<Row> = []
  const faults = [...new Set(rounds.map((r) => r.fault))]
  for (const fault of faults) {
    let failover = -Infinity, workStopped = 0, gap = Infinity, overlaps = 0, stale = 0, refused = 0, regressions = 0, late = 0
    const mine = rounds.filter((r) => r.fault === fault)
    for (const round of mine) {
      const inWindow = (t: number) => t >= round.faultAt && t < windowEnd
      const index = rounds.indexOf(round)
      const windowEnd = rounds[index + 1]?.faultAt ?? Infinity
      const next = starts.find((s) => s.start > round.faultAt && !(s.pid === round.victim && s.start < round.healAt))
      const victimLast = Math.max(
        round.faultAt,
        ...writes.filter((w) => w.pid === round.victim && w.r !== "expired" && w.at >= round.faultAt && w.at < (next?.start ?? Infinity) + 60_000 && (next === undefined || w.tok < next.tok)).map((w) => w.at)
      )
      if (round.backAt - round.healAt > boundOf(fault)) late++
      // A new term within this round's window (none: the leader kept its lease through the fault).
      if (next !== undefined && next.start < windowEnd) {
        failover = Math.max(failover, next.start - round.faultAt)
        const nextFirst = worked.find((s) => s.key === next.key)?.first ?? next.start
        gap = Math.min(gap, nextFirst - victimLast)
      }
      workStopped = Math.max(workStopped, victimLast - round.faultAt)
      overlaps += overlapAt.filter(inWindow).length
      stale += staleAt.filter(inWindow).length
      regressions += regressionAt.filter(inWindow).length
      refused += writes.filter((w) => w.r === "refused" && inWindow(w.at)).length
    }
    rows.push({
      backend, fault, rounds: mine.length, failover, workStopped, gap, overlaps, staleAccepted: stale, refused,
      tokenRegressions: regressions, late, notes: ""
    })
  }
  return rows
}

export const table = (rows: ReadonlyArray<Row>): string => {
  const header = "| backend | fault | rounds | failover (worst) | work stopped after (worst) | least gap to next leader's work | overlaps | stale writes accepted | writes refused | token regressions | late | notes |"
  const rule = "|---|---|---|---|---|---|---|---|---|---|---|---|"
  const ms = (n: number) => Number.isFinite(n) ? `${Math.round(n)} ms` : "-"
  return [header, rule, ...rows.map((r) =>
    `| ${r.backend} | ${r.fault} | ${r.rounds} | ${ms(r.failover)} | ${ms(r.workStopped)} | ${ms(r.gap)} | ${r.overlaps} | ${r.staleAccepted} | ${r.refused} | ${r.tokenRegressions} | ${r.late} | ${r.notes} |`
  )].join("\n")
}
