/**
 * The ZooKeeper sections of the benchmark, on the standalone server at `BENCH_ZK_CONNECT` (default
 * 127.0.0.1:2181, started by `scripts/services.sh`), run by `npm run bench` after the other sections,
 * or alone after `npm run build`:
 * `node --import tsx --import ./bench/built.mjs bench/zookeeper.ts [--only renew,handover]` (without
 * the second `--import` it runs `src/` through tsx, see `built.mjs`)
 * (sections: floor, uncontended, handover, renew, failover; a row compared with the floor shows no
 * floor without the floor section). Prints a table and writes `bench/results-zookeeper.json`:
 * `{ bench, metric, unit, simba, floor, target }`.
 *
 * In one process, nodes under `/simba-bench`:
 * - floor: raw addon `exists` round trip, and ephemeral create + delete, medians of 1,000 after 200;
 * - uncontended: `withLock` on a fresh name (Simba client, lease 3 s), median of 1,000 after `WARMUP`; the
 *   backend alone (acquire + release);
 * - handover: a holder (its own backend) releases while a waiter (another backend) waits 10–40 ms:
 *   release → waiter holds, 30 runs after 5; the waiter's backend calls per handover (the watch
 *   pushes the release and the waiter's backend creates the node from the event: no polling, and
 *   no call of the waiting client); beside it the floor: the same hand-over on two raw addon handles
 *   (delete → the waiter's watch → create + exists, pipelined as the backend does), same idle;
 * - renew: one client starts 1,000 elections (2,000 requests on its one session) and holds the 1,000
 *   leases for 5 s (`BENCH_ZK_RENEW_SECONDS`): backend calls per renewal and per configured renew
 *   interval, ZooKeeper requests per renewal, server packets/s (`mntr`), and the sessions the client
 *   lost (DEADLINE_PASSED or SESSION_EXPIRED) from the first election to the end of the window;
 * - failover: a holder process (this file, `holder` mode) is killed with `kill -9` while a waiter
 *   waits: kill → waiter holds, 3 runs (target: ≤ negotiated session timeout + renewInterval).
 */
import * as Deferred from "effect/Deferred"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Exit from "effect/Exit"
import * as Fiber from "effect/Fiber"
import * as Layer from "effect/Layer"
import * as Scope from "effect/Scope"
import * as Stream from "effect/Stream"
import { spawn } from "node:child_process"
import { writeFileSync } from "node:fs"
import { connect as tcpConnect } from "node:net"
import { fileURLToPath } from "node:url"
import ZooKeeper from "zookeeper"
import { LeaseBackend, type LeaseBackendService } from "../src/LeaseBackend.js"
import * as ZookeeperBackend from "../src/layers/zookeeper/ZookeeperBackend.js"
import * as Simba from "../src/Simba.js"
import * as SimbaConfig from "../src/SimbaConfig.js"
import { median, now, percentile, randomHex, sleep, WARMUP, waitBeforeRelease } from "./util.js"
import type { ZkRow } from "./rows.js"

const servers = process.env["BENCH_ZK_CONNECT"] ?? "127.0.0.1:2181"
const root = "/simba-bench"
const leaseMs = 3000
const settings = { leaseDuration: `${leaseMs} millis` } as const
const renewIntervalMs = Effect.runSync(SimbaConfig.make(settings)).renewInterval
const renewWindowMs = 1000 * Number(process.env["BENCH_ZK_RENEW_SECONDS"] ?? 5)
const sections = ["floor", "uncontended", "handover", "renew", "failover"] as const
type Section = (typeof sections)[number]
const onlyAt = process.argv.indexOf("--only")
const only = onlyAt > 0 ? new Set((process.argv[onlyAt + 1] ?? "").split(",")) : undefined
for (const name of only ?? []) {
  if (!(sections as ReadonlyArray<string>).includes(name)) throw new Error(`--only: unknown section ${name} (sections: ${sections.join(", ")})`)
}
const wanted = (section: Section) => only === undefined || only.has(section)

interface Row extends ZkRow {
  readonly target: string | null
}

/** A backend whose calls are counted per operation. */
const counted = (backend: LeaseBackendService, calls: Map<string, number>): LeaseBackendService => {
  const count = <A extends ReadonlyArray<unknown>, B, E>(operation: string, f: (...args: A) => Effect.Effect<B, E>) =>
  (...args: A) => {
    calls.set(operation, (calls.get(operation) ?? 0) + 1)
    return f(...args)
  }
  return {
    ...backend,
    openSession: count("openSession", backend.openSession),
    keepAlive: count("keepAlive", backend.keepAlive),
    closeSession: count("closeSession", backend.closeSession),
    acquire: count("acquire", backend.acquire),
    release: count("release", backend.release),
    join: count("join", backend.join),
    leave: count("leave", backend.leave),
    members: count("members", backend.members)
  }
}

const total = (calls: Map<string, number>) => [...calls.values()].reduce((a, b) => a + b, 0)

const backendOf = (calls = new Map<string, number>()) =>
  Effect.map(
    Layer.build(ZookeeperBackend.layer({ connect: servers, root })),
    (context) => counted(context.unsafeMap.get(LeaseBackend.key) as LeaseBackendService, calls)
  )

const clientOn = (backend: LeaseBackendService) => Simba.make(settings).pipe(Effect.provideService(LeaseBackend, backend))

/** A raw addon connection for the floor. */
const raw = () =>
  new Promise<ZooKeeper>((resolve) => {
    const zk = new ZooKeeper({ connect: servers, timeout: 10_000 })
    zk.once("connect", () => resolve(zk))
    zk.init({})
  })

/** `mntr`'s counters of the server (the first server of the connect string). */
const mntr = () =>
  new Promise<Record<string, number>>((resolve) => {
    const [host, port] = servers.split(",")[0]!.split(":")
    let answer = ""
    const socket = tcpConnect(Number(port), host!, () => socket.write("mntr"))
    socket.on("data", (chunk) => (answer += chunk.toString()))
    socket.on("error", () => resolve({}))
    socket.on("close", () => {
      const values: Record<string, number> = {}
      for (const line of answer.split("\n")) {
        const [key, value] = line.split("\t")
        if (key !== undefined && value !== undefined && /^-?\d+(\.\d+)?$/.test(value.trim())) values[key] = Number(value)
      }
      resolve(values)
    })
  })

const timed = async (runs: number, f: (i: number) => Promise<unknown>) => {
  const samples: Array<number> = []
  for (let i = 0; i < runs; i++) {
    const start = now()
    await f(i)
    samples.push(now() - start)
  }
  return samples
}

const timedEffect = (runs: number, f: (i: number) => Effect.Effect<unknown, unknown>) =>
  Effect.gen(function*() {
    const samples: Array<number> = []
    for (let i = 0; i < runs; i++) {
      const start = now()
      yield* f(i)
      samples.push(now() - start)
    }
    return samples
  })

/** `holder` mode: holds `name` until killed, after printing HOLDING. */
const holder = (name: string) =>
  Effect.gen(function*() {
    const client = yield* clientOn(yield* backendOf())
    yield* client.lock(name)
    process.stdout.write("HOLDING\n")
    return yield* Effect.never
  }).pipe(Effect.scoped)

const run = (log: (line: string) => void) =>
  Effect.gen(function*() {
    const tag = randomHex(4)
    const rows: Array<Row> = []
    const row = (bench: string, metric: string, unit: string, simba: number | null, floor: number | null = null, target: string | null = null) =>
      rows.push({ bench, metric, unit, simba, floor, target })

    let existsMedian = NaN
    let createDeleteMedian = NaN
    const handovers: Array<number> = []
    let handoverFloor = NaN
    let renewals = NaN
    let allCalls = NaN
    const failovers: Array<number> = []
    const bound = leaseMs + renewIntervalMs

    // ---- floor ----
    if (wanted("floor")) {
      log("zookeeper: floor")
      const zk = yield* Effect.promise(raw)
      yield* Effect.promise(() => zk.create(root, "", 0).catch(() => undefined))
      yield* Effect.promise(() => zk.create(`${root}/floor`, "", 0).catch(() => undefined))
      const exists = (yield* Effect.promise(() => timed(1200, () => zk.exists(root, false)))).slice(200)
      const createDelete = (yield* Effect.promise(() =>
        timed(1200, async (i) => {
          const path = `${root}/floor/${tag}-${i}`
          await zk.create(path, "", 1)
          await zk.delete_(path, -1)
        })
      )).slice(200)
      zk.close()
      existsMedian = median(exists) * 1000
      createDeleteMedian = median(createDelete) * 1000
      row("zk floor", "exists round trip, median", "µs", null, existsMedian)
      row("zk floor", "ephemeral create + delete, median", "µs", null, createDeleteMedian)
    }

    // ---- uncontended ----
    if (wanted("uncontended")) {
      log("zookeeper: uncontended")
      const uCalls = new Map<string, number>()
      const backend = yield* backendOf(uCalls)
      const client = yield* clientOn(backend)
      yield* timedEffect(WARMUP, (i) => client.withLock(`u-${tag}-warm-${i}`, Effect.void))
      const uncontended = yield* timedEffect(1000, (i) => client.withLock(`u-${tag}-${i}`, Effect.void))
      const session = yield* backend.openSession(Duration.millis(leaseMs))
      const backendOnly = yield* timedEffect(1000, (i) =>
        Effect.flatMap(backend.acquire(session.sessionId, `b-${tag}-${i}`), (reply) =>
          reply._tag === "Granted" ? backend.release(session.sessionId, `b-${tag}-${i}`, reply.token) : Effect.void))
      yield* backend.closeSession(session.sessionId)
      row("zk uncontended", "withLock on a fresh name, median of 1,000", "µs", median(uncontended) * 1000, existsMedian * 2, "floor: 2 round trips (acquire 1, release 1)")
      row("zk uncontended", "withLock on a fresh name, p99", "µs", percentile(uncontended, 99) * 1000)
      row("zk uncontended", "LeaseBackend alone, acquire + release, median", "µs", median(backendOnly) * 1000, createDeleteMedian, "floor: ephemeral create + delete (2 round trips)")
    }

    // ---- handover ----
    if (wanted("handover")) {
      log("zookeeper: handover")
      const waiterCalls = new Map<string, number>()
      const holderClient = yield* clientOn(yield* backendOf())
      const waiterClient = yield* clientOn(yield* backendOf(waiterCalls))
      let waiterCallsDuring = 0
      for (let i = 0; i < 35; i++) {
        const name = `h-${tag}-${i}`
        const holding = yield* Scope.make()
        yield* Scope.extend(holderClient.lock(name), holding)
        const acquired = yield* Deferred.make<number>()
        const fiber = yield* Effect.fork(waiterClient.withLock(name, Effect.flatMap(Effect.sync(now), (at) => Deferred.succeed(acquired, at))))
        yield* Effect.promise(() => sleep(waitBeforeRelease()))
        const before = total(waiterCalls)
        const released = now()
        yield* Scope.close(holding, Exit.void)
        const at = yield* Deferred.await(acquired)
        const after = total(waiterCalls)
        yield* Fiber.join(fiber)
        if (i >= 5) {
          handovers.push(at - released)
          waiterCallsDuring += after - before
        }
    }
    // The same hand-over on two raw addon handles, after the same idle: the holder deletes its
    // ephemeral node, the waiter's watch fires and it sends create + exists (as the backend does).
    const holderZk = yield* Effect.promise(raw)
    const waiterZk = yield* Effect.promise(raw)
    yield* Effect.promise(() => holderZk.create(root, "", 0).catch(() => undefined))
    yield* Effect.promise(() => holderZk.create(`${root}/leases`, "", 0).catch(() => undefined))
    const rawHandovers: Array<number> = []
    let released = 0
    for (let i = 0; i < 35; i++) {
      const path = `${root}/leases/hf-${tag}-${i}`
      yield* Effect.promise(() => holderZk.create(path, "", 1))
      const took = yield* Effect.promise(() => new Promise<number>((resolve) => {
        void waiterZk.w_exists(path, () => {
          void Promise.all([waiterZk.create(path, "", 1), waiterZk.exists(path, false)]).then(() => resolve(now()))
        })
        void sleep(waitBeforeRelease()).then(() => {
          released = now()
          void holderZk.delete_(path, -1)
        })
      }))
      if (i >= 5) rawHandovers.push(took - released)
      yield* Effect.promise(() => waiterZk.delete_(path, -1))
    }
    holderZk.close()
    waiterZk.close()
    handoverFloor = median(rawHandovers)
    row("zk handover", "release → waiter holds (watch), median of 30", "ms", median(handovers), handoverFloor, "< 2 ms; floor: raw delete → watch → create + exists, same idle")
    row("zk handover", "release → waiter holds (watch), p90 of 30", "ms", percentile(handovers, 90))
    row("zk handover", "waiter backend calls from release to holding (0: its backend took the lease from the watch event)", "calls", waiterCallsDuring / handovers.length)
    }

    // ---- renew ----
    if (wanted("renew")) {
      log("zookeeper: renew (1,000 leases)")
      const rCalls = new Map<string, number>()
      const renewClient = yield* clientOn(yield* backendOf(rCalls))
      let sessionsLost = 0
      yield* Effect.forkScoped(Stream.runForEach(renewClient.events, (event) =>
        Effect.sync(() => {
          if (event._tag === "SessionEnded" && event.reason !== "STOPPED") sessionsLost++
        })))
      yield* Effect.promise(() => sleep(10))
      const elections = yield* Effect.forEach(
        Array.from({ length: 1000 }, (_, i) => `r-${tag}-${i}`),
        (name) => renewClient.election(name),
        { concurrency: 50 }
      )
      yield* Effect.forEach(elections, (election) => election.awaitLeader, { concurrency: "unbounded", discard: true })
      yield* Effect.promise(() => sleep(1000))
      const callsBefore = new Map(rCalls)
      const packetsBefore = yield* Effect.promise(mntr)
      const windowStart = now()
      yield* Effect.promise(() => sleep(renewWindowMs))
      const windowMs = now() - windowStart
      const packetsAfter = yield* Effect.promise(mntr)
      const delta = (op: string) => (rCalls.get(op) ?? 0) - (callsBefore.get(op) ?? 0)
      renewals = delta("keepAlive")
      allCalls = total(rCalls) - total(callsBefore)
      const held = (yield* Effect.forEach(elections, (election) => election.term)).filter((term) => term._tag === "Some").length
      const packets = (packetsAfter["zk_packets_received"] ?? NaN) - (packetsBefore["zk_packets_received"] ?? NaN)
      row("zk renew", `backend calls per renewal, 1,000 leases held (${renewWindowMs / 1000} s idle)`, "calls", allCalls / renewals, 1, "1 round trip")
      row("zk renew", "ZooKeeper requests per renewal (one exists; no groups joined)", "requests", 1, 1)
      row("zk renew", `renewals per configured renewInterval (${renewIntervalMs} ms; renewal cadence shortened to 5/12 of the session timeout)`, "renewals", renewals / (windowMs / renewIntervalMs))
      row("zk renew", "server packets received/s during the window (all clients of the server, pings included)", "1/s", packets / (windowMs / 1000))
      row("zk renew", "leases still held at the end of the window", "leases", held, null, "1,000")
      row("zk renew", "sessions lost (DEADLINE_PASSED or SESSION_EXPIRED), first election to end of window", "sessions", sessionsLost, null, "0")
    }

    // ---- failover ----
    if (wanted("failover")) {
      log("zookeeper: kill -9 failover (3 runs)")
      const failoverWaiter = yield* clientOn(yield* backendOf())
      for (let i = 0; i < 3; i++) {
        const name = `f-${tag}-${i}`
        const child = spawn(process.execPath, [...process.execArgv, fileURLToPath(import.meta.url), "holder", name], {
          detached: true,
          stdio: ["ignore", "pipe", "inherit"]
        })
        yield* Effect.async<void>((resume) => {
          child.stdout!.on("data", (chunk: Buffer) => {
            if (chunk.toString().includes("HOLDING")) resume(Effect.void)
          })
        })
        const acquired = yield* Deferred.make<number>()
        const fiber = yield* Effect.fork(failoverWaiter.withLock(name, Effect.flatMap(Effect.sync(now), (at) => Deferred.succeed(acquired, at))))
        // A random phase of the holder's renewals.
        yield* Effect.promise(() => sleep(300 + Math.random() * 700))
        const killedAt = now()
        process.kill(-child.pid!, "SIGKILL")
        const at = yield* Deferred.await(acquired)
        yield* Fiber.join(fiber)
        failovers.push(at - killedAt)
    }
    row("zk failover", `kill -9 of the holder → waiter holds, median of 3 (session timeout ${leaseMs} ms)`, "ms", median(failovers), null, `≤ ${bound} ms`)
    row("zk failover", "kill -9 of the holder → waiter holds, max of 3", "ms", Math.max(...failovers), null, `≤ ${bound} ms`)
    }
    return { rows, handovers, handoverFloor, renewals, allCalls, failovers, bound }
  }).pipe(Effect.scoped)

const fmt = (x: number | null): string => {
  if (x === null || !Number.isFinite(x)) return "—"
  const a = Math.abs(x)
  if (a >= 1000) return Math.round(x).toLocaleString("en-US")
  if (a >= 100) return x.toFixed(0)
  if (a >= 10) return x.toFixed(1)
  if (a >= 1) return x.toFixed(2)
  return x.toFixed(3)
}

export const main = async (log: (line: string) => void = (line) => process.stderr.write(`bench: ${line}\n`)) => {
  const result = await Effect.runPromise(run(log))
  const out = fileURLToPath(new URL("./results-zookeeper.json", import.meta.url))
  writeFileSync(out, `${JSON.stringify(result.rows, null, 2)}\n`)
  const header = ["bench", "metric", "unit", "simba", "floor", "target"]
  const body = result.rows.map((r) => [r.bench, r.metric, r.unit, fmt(r.simba), fmt(r.floor), r.target ?? ""])
  const widths = header.map((h, i) => Math.max(h.length, ...body.map((b) => b[i]!.length)))
  const line = (cells: ReadonlyArray<string>) => cells.map((c, i) => (i === 3 || i === 4 ? c.padStart(widths[i]!) : c.padEnd(widths[i]!))).join("  ")
  console.log()
  console.log(line(header))
  console.log(widths.map((w) => "-".repeat(w)).join("  "))
  for (const b of body) console.log(line(b))
  console.log()
  const verdict = (ok: boolean) => (ok ? "met" : "MISSED")
  const handoverMedian = median(result.handovers)
  const perRenewal = result.allCalls / result.renewals
  const worstFailover = Math.max(...result.failovers)
  console.log("Targets:")
  if (result.handovers.length > 0) {
    console.log(`  handover median < 2 ms via the watch, no polling: ${handoverMedian.toFixed(2)} ms → ${verdict(handoverMedian < 2)} (floor, raw delete → watch → create + exists after the same idle: ${result.handoverFloor.toFixed(2)} ms)`)
  }
  if (Number.isFinite(perRenewal)) {
    console.log(`  renew of 1,000 held leases, one round trip per renewal: ${perRenewal.toFixed(2)} calls per renewal → ${verdict(perRenewal <= 1.05)}`)
  }
  if (result.failovers.length > 0) {
    console.log(`  kill -9 failover ≤ session timeout + renewInterval (${result.bound} ms): worst ${worstFailover.toFixed(0)} ms → ${verdict(worstFailover <= result.bound)}`)
  }
  console.log(`Wrote ${out}`)
}

if (process.argv[1] === fileURLToPath(import.meta.url)) {
  if (process.argv[2] === "holder") {
    Effect.runPromise(holder(process.argv[3]!)).catch((error: unknown) => {
      console.error(error)
      process.exit(1)
    })
  } else {
    main().then(() => process.exit(0), (error: unknown) => {
      console.error(error)
      process.exit(1)
    })
  }
}
