/**
 * The Redis sections of the benchmark: Simba (`src/layers/redis/` + `Simba.make`) beside
 * `@sesamecare-oss/redlock` and `redis-semaphore` `Mutex` on the same Redis, in one process.
 *
 * Settings: lease 3 s for everyone (Simba `leaseDuration: "3 seconds"`, so `renewInterval` 1 s;
 * redlock `duration` 3000 ms; Mutex `lockTimeout` 3000 ms).
 * - defaults: each library's defaults, except redlock `retryCount: -1` (retry forever) and Mutex
 *   `acquireTimeout` one hour, so that no contender gives up;
 * - tuned: the same plus redlock `retryDelay: 5` (its `retryJitter` stays at the default 100 ms) and
 *   Mutex `retryInterval: 1`.
 * Simba has no polling knob (waiters are woken by the `released` push), so it runs once per bench and
 * its figure is shown in both the "defaults" and the "tuned" rows.
 *
 * Every contender, holder and waiter has its own connection(s) (a Simba client has two: commands and
 * the hint subscriber). All keys start with the run's prefix and are deleted at the end (`run.ts`).
 */
import { Redlock } from "@sesamecare-oss/redlock"
import * as Deferred from "effect/Deferred"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Exit from "effect/Exit"
import * as Fiber from "effect/Fiber"
import * as Scope from "effect/Scope"
import type { Redis } from "ioredis"
import { resolve as resolvePath } from "node:path"
import { fileURLToPath } from "node:url"
import { Mutex } from "redis-semaphore"
import type * as Client from "../src/Simba.js"
import { LeaseBackend, type LeaseBackendService } from "../src/LeaseBackend.js"
import * as RedisBackend from "../src/layers/redis/RedisBackend.js"
import * as Simba from "../src/Simba.js"
import * as SimbaConfig from "../src/SimbaConfig.js"
import {
  deleteKeys,
  holdLocks,
  jain,
  leadersOf,
  median,
  newRedis,
  now,
  percentile,
  quit,
  randomHex,
  redisUrl,
  roundTrips,
  roundTripsSince,
  foreignScripts,
  serverCommands,
  serverDelta,
  serverMicros,
  serverStats,
  sleep,
  sleepUntil,
  waitBeforeRelease,
  WARMUP
} from "./util.js"

export const LEASE_MS = 3000
export const simbaSettings = { leaseDuration: "3 seconds" } as const

/** Simba's renewal period at these settings (1 s: leaseDuration / 3). */
export const simbaRenewInterval = (): number => Effect.runSync(SimbaConfig.make(simbaSettings)).renewInterval

export interface Context {
  /** Prefix of every key and connection name of this run, e.g. `bench-1a2b3c`. */
  readonly prefix: string
  /** Connection for `INFO`, never used for anything else. */
  readonly monitor: Redis
  readonly log: (line: string) => void
}

export type Tuning = "defaults" | "tuned"
export type PeerKind = "redlock" | "redisSemaphore"

// -------------------------------------------------------------------------------------------------
// Peers
// -------------------------------------------------------------------------------------------------

type Release = () => Promise<void>

interface Peer {
  readonly redis: Redis
  /** Waits until `name` is held; returns its release. */
  readonly acquire: (name: string) => Promise<Release>
  readonly close: () => Promise<void>
}

/** Redlock's auto-extension period at its defaults for a 3 s lock: duration − drift − threshold. */
export const redlockExtendPeriod = LEASE_MS - (Math.round(0.01 * LEASE_MS) + 2) - 500
/** Mutex refresh period at its defaults: `refreshInterval = lockTimeout × 0.8`. */
export const mutexRefreshPeriod = Math.round(LEASE_MS * 0.8)

const redlockSettings = (tuning: Tuning) => ({ retryCount: -1, ...(tuning === "tuned" ? { retryDelay: 5 } : {}) })
const mutexOptions = (tuning: Tuning) => ({
  lockTimeout: LEASE_MS,
  acquireTimeout: 3_600_000,
  ...(tuning === "tuned" ? { retryInterval: 1 } : {})
})

export const makePeer = async (ctx: Context, kind: PeerKind, tuning: Tuning, connection: string): Promise<Peer> => {
  const redis = await newRedis(connection)
  if (kind === "redlock") {
    const redlock = new Redlock([redis], redlockSettings(tuning))
    return {
      redis,
      acquire: async (name) => {
        const lock = await redlock.acquire([`${ctx.prefix}:redlock:${name}`], LEASE_MS)
        return async () => {
          await lock.release()
        }
      },
      close: () => quit(redis)
    }
  }
  return {
    redis,
    acquire: async (name) => {
      // redis-semaphore stores it under `mutex:<key>`.
      const mutex = new Mutex(redis, `${ctx.prefix}:mutex:${name}`, mutexOptions(tuning))
      await mutex.acquire()
      return () => mutex.release()
    },
    close: () => quit(redis)
  }
}

// -------------------------------------------------------------------------------------------------
// Simba clients
// -------------------------------------------------------------------------------------------------

interface SimbaHandle {
  readonly client: Client.SimbaClient
  readonly backend: LeaseBackendService
  readonly sessionId: string
}

/** Waits (polling the snapshot) until the client's session is LIVE; fails after 10 s. */
const awaitLive = (client: Client.SimbaClient): Effect.Effect<string> =>
  Effect.gen(function*() {
    const deadline = now() + 10_000
    for (;;) {
      const snapshot = yield* client.snapshot
      if (snapshot.session.status === "LIVE" && snapshot.session.id !== undefined) return snapshot.session.id
      if (now() > deadline) return yield* Effect.dieMessage("Simba session not LIVE within 10 s")
      yield* Effect.sleep("2 millis")
    }
  })

/** A Redis backend (two connections named `connection` and `connection:hints`) and a Simba client on it, session open. */
/** Simba's Redis backend on the run's prefix, its connections named `connection` and `connection:hints`. */
export const simbaBackend = (ctx: Context, connection: string) =>
  RedisBackend.make({
    url: redisUrl,
    keyPrefix: `${ctx.prefix}:simba`,
    lockDelay: 0, // a new prefix nobody used: no lock-delay (see the README's Redis section)
    connectionName: connection
  })

export const simbaClient = (ctx: Context, connection: string): Effect.Effect<SimbaHandle, unknown, Scope.Scope> =>
  Effect.gen(function*() {
    const backend = yield* simbaBackend(ctx, connection)
    const client = yield* Simba.make(simbaSettings).pipe(Effect.provideService(LeaseBackend, backend))
    const sessionId = yield* awaitLive(client)
    return { client, backend, sessionId }
  })

/** Runs `run` and returns its result with the process CPU time (user + system) it took per `n`, in ms. */
export const withCpu = async <A>(n: number, run: () => Promise<A>): Promise<readonly [A, number]> => {
  const before = process.cpuUsage()
  const result = await run()
  const used = process.cpuUsage(before)
  return [result, (used.user + used.system) / 1000 / n]
}

/** Runs `effect` with its resources in `scope` (which the caller closes). */
export const inScope = <A>(scope: Scope.CloseableScope, effect: Effect.Effect<A, unknown, Scope.Scope>): Promise<A> =>
  Effect.runPromise(Scope.extend(effect, scope))

export const newScope = (): Promise<Scope.CloseableScope> => Effect.runPromise(Scope.make())
export const closeScope = (scope: Scope.CloseableScope): Promise<void> => Effect.runPromise(Scope.close(scope, Exit.void))

// -------------------------------------------------------------------------------------------------
// floor
// -------------------------------------------------------------------------------------------------

export interface FloorResult {
  readonly ping: ReadonlyArray<number>
  readonly eval: ReadonlyArray<number>
  /** The server's µs per `EVAL` of `return 1` (its own time, no network), least of 5 batches of 200. */
  readonly evalServerMicros: number
  /** Release script that PUBLISHes → subscriber hears it → one EVAL: the least a push handover costs. */
  readonly pushHandover: ReadonlyArray<number>
  /**
   * The same, each after the idle a hand-over sample waits (10–40 ms, `waitBeforeRelease`): a process
   * and a server that slept wake slower than in a tight loop. The hand-over rows compare with this.
   */
  readonly pushHandoverAfterIdle: ReadonlyArray<number>
}

export const timeSequential = async (n: number, warmup: number, op: (i: number) => Promise<unknown>): Promise<Array<number>> => {
  for (let i = 0; i < warmup; i++) await op(-1 - i)
  const samples: Array<number> = []
  for (let i = 0; i < n; i++) {
    const t0 = now()
    await op(i)
    samples.push(now() - t0)
  }
  return samples
}

export const floor = async (ctx: Context): Promise<FloorResult> => {
  const redis = await newRedis(`${ctx.prefix}-floor`)
  const waiter = await newRedis(`${ctx.prefix}-floor-waiter`)
  const subscriber = await newRedis(`${ctx.prefix}-floor-sub`)
  try {
    const ping = await timeSequential(2000, 300, () => redis.ping())
    const evalSamples = await timeSequential(2000, 300, () => redis.eval("return 1", 0))
    const evalServerMicros = await serverTimePerOp(ctx, 200, [], async (batch) => {
      for (let i = 0; i < batch; i++) await redis.eval("return 1", 0)
    })
    const channel = `${ctx.prefix}:floor:released`
    let onMessage: (() => void) | undefined
    subscriber.on("message", () => onMessage?.())
    await subscriber.subscribe(channel)
    const publishScript = "redis.call('PUBLISH', KEYS[1], 'released') return 1"
    const handOver = () =>
      new Promise<void>((resolve, reject) => {
        onMessage = () => {
          waiter.eval("return 1", 0).then(() => resolve(), reject)
        }
        redis.eval(publishScript, 1, channel).catch(reject)
      })
    const pushHandover = await timeSequential(300, 50, handOver)
    const pushHandoverAfterIdle: Array<number> = []
    for (let i = 0; i < 50; i++) {
      await sleep(waitBeforeRelease())
      const t0 = now()
      await handOver()
      pushHandoverAfterIdle.push(now() - t0)
    }
    return { ping, eval: evalSamples, evalServerMicros, pushHandover, pushHandoverAfterIdle }
  } finally {
    await Promise.all([quit(redis), quit(waiter), quit(subscriber)])
  }
}

// -------------------------------------------------------------------------------------------------
// uncontended
// -------------------------------------------------------------------------------------------------

export interface UncontendedResult {
  /** acquire + release, ms, 2,000 sequential runs on fresh names. */
  readonly samples: ReadonlyArray<number>
  /** Process CPU time (user + system) per acquire + release during those runs, ms. */
  readonly cpuPerPair: number
  /** Server commands (in-script ones included) per acquire + release, least of 5 batches of 50. */
  readonly commandsPerPair: number
  /**
   * The server's own µs per acquire + release (its top-level commands, scripts with what they run;
   * no network), least of 5 batches of 50.
   */
  readonly serverMicrosPerPair: number
}

export interface SimbaUncontendedResult extends UncontendedResult {
  /** The same pair straight on the `LeaseBackendService` (no client, no engine): where the time goes. */
  readonly backendOnly: ReadonlyArray<number>
  readonly backendOnlyCpuPerPair: number
  /** withLock on one name used over and over, on its own client: the client's cost without per-name growth. */
  readonly sameName: ReadonlyArray<number>
  /** Server commands of one keepAlive of a session holding nothing (least of 5 batches of 10). */
  readonly commandsPerKeepAlive: number
  /** Client round trips per acquire + release (the client's own count, session renewals left out). */
  readonly roundTripsPerPair: number
}

export const RUNS = 2000

/**
 * A server count per operation: 5 batches of `batch` operations, each between two readings; the least
 * batch wins (other traffic, a renewal in passing, can only add), divided by `batch`.
 */
const leastPerOp = async <R>(
  batch: number,
  read: () => Promise<R>,
  delta: (before: R, after: R) => number,
  run: (batch: number, round: number) => Promise<void>
) => {
  let least = Number.POSITIVE_INFINITY
  for (let round = 0; round < 5; round++) {
    const before = await read()
    await run(batch, round)
    least = Math.min(least, delta(before, await read()))
  }
  return least / batch
}

/** Server commands per operation (`INFO` readings, see `leastPerOp`). */
const calibrate = (ctx: Context, batch: number, run: (batch: number, round: number) => Promise<void>) =>
  leastPerOp(batch, () => serverCommands(ctx.monitor), serverDelta, run)

/**
 * The server's µs per operation in a lock's top-level commands (see `serverMicros`; `plain`: the
 * plain commands it sends besides scripts), as `leastPerOp` counts.
 */
const serverTimePerOp = (
  ctx: Context,
  batch: number,
  plain: ReadonlyArray<string>,
  run: (batch: number, round: number) => Promise<void>
) => leastPerOp(batch, () => serverStats(ctx.monitor), (before, after) => serverMicros(before, after, plain), run)

/**
 * Three parts, in this order, each with nothing else of Simba alive in the process (a live client
 * would add its renewals and, on a name it waited for, the messages of that lease's channel):
 * 1. the `LeaseBackendService` alone (no client, no engine), `WARMUP` + 2,000 timed pairs (the
 *    floors under it are `floors/redis.ts`);
 * 2. a client on one name reused (`WARMUP` + 1,000 timed): the client's fixed cost;
 * 3. the benchmark figure: a new client (session open before timing), `WARMUP` + 2,000 timed runs,
 *    each on a fresh name.
 */
export const uncontendedSimba = async (ctx: Context): Promise<SimbaUncontendedResult> => {
  const timed = (label: string, n: number, op: (name: string) => Effect.Effect<unknown, unknown>) =>
    Effect.gen(function*() {
      const samples: Array<number> = []
      for (let i = 0; i < n; i++) {
        const name = `${label}-${i}`
        const t0 = now()
        yield* op(name)
        samples.push(now() - t0)
      }
      return samples
    })

  const alone = await newScope()
  let backendOnly: ReadonlyArray<number>
  let backendOnlyCpuPerPair: number
  let commandsPerKeepAlive: number
  try {
    const backend = await inScope(alone, simbaBackend(ctx, `${ctx.prefix}-simba-b`))
    // Long enough to outlive the runs without renewals.
    const { sessionId } = await Effect.runPromise(backend.openSession(Duration.millis(LEASE_MS * 20)))
    const backendPair = (name: string) =>
      Effect.flatMap(backend.acquire(sessionId, name), (reply) =>
        reply._tag === "Granted" ? backend.release(sessionId, name, reply.token) : Effect.dieMessage(`not granted: ${reply._tag}`))
    await Effect.runPromise(timed("b-warm", WARMUP, backendPair))
    ;[backendOnly, backendOnlyCpuPerPair] = await withCpu(RUNS, () => Effect.runPromise(timed("b", RUNS, backendPair)))
    await Effect.runPromise(backend.closeSession(sessionId))
    // A session like a client's (lease 3 s, renewed with 3 s: its PEXPIRE runs), holding nothing.
    const renewed = await Effect.runPromise(backend.openSession(Duration.millis(LEASE_MS)))
    commandsPerKeepAlive = await calibrate(ctx, 10, async (batch) => {
      for (let i = 0; i < batch; i++) {
        await Effect.runPromise(backend.keepAlive(renewed.sessionId, Duration.millis(LEASE_MS)))
      }
    })
    await Effect.runPromise(backend.closeSession(renewed.sessionId))
  } finally {
    await closeScope(alone)
  }

  const reused = await newScope()
  let sameName: ReadonlyArray<number>
  try {
    const { client } = await inScope(reused, simbaClient(ctx, `${ctx.prefix}-simba-s`))
    const same = () => client.withLock("same-name", Effect.void)
    await Effect.runPromise(timed("same-warm", WARMUP, same))
    sameName = await Effect.runPromise(timed("same", RUNS / 2, same))
  } finally {
    await closeScope(reused)
  }

  const scope = await newScope()
  try {
    const { client } = await inScope(scope, simbaClient(ctx, `${ctx.prefix}-simba-u`))
    const pair = (name: string) => client.withLock(name, Effect.void)
    await Effect.runPromise(timed("u-warm", WARMUP, pair))
    const trips = roundTrips(`${ctx.prefix}-simba-u`)
    const [samples, cpuPerPair] = await withCpu(RUNS, () => Effect.runPromise(timed("u", RUNS, pair)))
    const tripsDuring = roundTripsSince(`${ctx.prefix}-simba-u`, trips)
    const roundTripsPerPair = (tripsDuring.total - tripsDuring.session) / RUNS
    const commandsPerPair = await calibrate(ctx, 50, async (batch, round) => {
      await Effect.runPromise(timed(`cal-${round}`, batch, pair))
      // withLock returns once the engine sent the release; let the last one land before INFO.
      await sleep(20)
    })
    const serverMicrosPerPair = await serverTimePerOp(ctx, 50, [], async (batch, round) => {
      await Effect.runPromise(timed(`srv-${round}`, batch, pair))
      await sleep(20)
    })
    return {
      samples,
      cpuPerPair,
      serverMicrosPerPair,
      backendOnly,
      backendOnlyCpuPerPair,
      sameName,
      commandsPerPair,
      commandsPerKeepAlive,
      roundTripsPerPair
    }
  } finally {
    await closeScope(scope)
  }
}

export const uncontendedPeer = async (ctx: Context, kind: PeerKind): Promise<UncontendedResult> => {
  const peer = await makePeer(ctx, kind, "defaults", `${ctx.prefix}-${kind}-u`)
  try {
    const pair = async (name: string) => {
      const release = await peer.acquire(name)
      await release()
    }
    await timeSequential(WARMUP, 0, (i) => pair(`u-warm-${i}`))
    const [samples, cpuPerPair] = await withCpu(RUNS, () => timeSequential(RUNS, 0, (i) => pair(`u-${i}`)))
    const commandsPerPair = await calibrate(ctx, 50, async (batch, round) => {
      for (let i = 0; i < batch; i++) await pair(`cal-${round}-${i}`)
    })
    // redis-semaphore takes a Mutex with a plain SET NX (its release script runs no SET); redlock
    // sends scripts only.
    const serverMicrosPerPair = await serverTimePerOp(ctx, 50, kind === "redisSemaphore" ? ["set"] : [], async (batch, round) => {
      for (let i = 0; i < batch; i++) await pair(`srv-${round}-${i}`)
    })
    return { samples, cpuPerPair, commandsPerPair, serverMicrosPerPair }
  } finally {
    await peer.close()
  }
}

// -------------------------------------------------------------------------------------------------
// contended
// -------------------------------------------------------------------------------------------------

export const CONTENDERS = 8
const CONTENDED_WARMUP_MS = 500
const CONTENDED_WINDOW_MS = 10_000

export interface ContendedResult {
  readonly windowMs: number
  readonly sections: number
  /** Process CPU time (user + system; all contenders run in this process) per section in the window, ms. */
  readonly cpuPerSection: number
  /** That CPU time over the window's wall time (1: one core busy all the time). */
  readonly cpuShare: number
  readonly perContender: ReadonlyArray<number>
  readonly sectionsPerSecond: number
  readonly fairness: number
  readonly longestWaitMs: number
  readonly serverCommands: number
  readonly roundTrips: number
  readonly sessionRoundTrips: number
  /** (server commands − pairs × commandsPerPair − session round trips × commandsPerKeepAlive) / s. */
  readonly waiterCommandsPerSecond: number
  /** (round trips − session round trips − 2 × pairs) / s. */
  readonly waiterRoundTripsPerSecond: number
  /** Simba's sessions' renewals (not counted as waiter load), commands / s. */
  readonly sessionCommandsPerSecond: number
  /** Scripts other clients of the server ran during the window (0: the server counts are ours alone). */
  readonly foreignScripts: number
}

interface Section {
  readonly contender: number
  /** When the contender started asking. */
  readonly asked: number
  /** When it held the lock. */
  readonly held: number
}

interface Reading {
  readonly at: number
  readonly server: number
  readonly stats: Awaited<ReturnType<typeof serverStats>>
}

/**
 * The measuring window: `INFO` on the monitor connection at `from` and at `to`, each stamped with
 * the middle of its round trip; the client-side round trips are read at the same instants.
 */
const windowProbe = async (ctx: Context, connections: string, from: number, to: number) => {
  const read = async () => {
    const t0 = now()
    const rt = roundTrips(connections)
    const cpu = process.cpuUsage()
    const stats = await serverStats(ctx.monitor)
    return { reading: { at: (t0 + now()) / 2, server: stats.total, stats } satisfies Reading, rt, cpu }
  }
  await sleepUntil(from)
  const start = await read()
  await sleepUntil(to)
  const end = await read()
  return { start, end }
}

const contendedResult = (
  sections: ReadonlyArray<Section>,
  probe: Awaited<ReturnType<typeof windowProbe>>,
  commandsPerPair: number,
  commandsPerKeepAlive: number
): ContendedResult => {
  const from = probe.start.reading.at
  const to = probe.end.reading.at
  const seconds = (to - from) / 1000
  const inWindow = sections.filter((s) => s.held >= from && s.held < to)
  const perContender = Array.from({ length: CONTENDERS }, (_, i) => inWindow.filter((s) => s.contender === i).length)
  // Every wait that overlaps the window, whole: one that began in the warm-up, or outlasted the window, counts too.
  const waits = sections.filter((s) => s.asked < to && s.held >= from).map((s) => s.held - s.asked)
  const serverCommands = serverDelta(probe.start.reading.server, probe.end.reading.server)
  const roundTrips = probe.end.rt.total - probe.start.rt.total
  const sessionRoundTrips = probe.end.rt.session - probe.start.rt.session
  const sessionCommands = sessionRoundTrips * commandsPerKeepAlive
  const cpu = { user: probe.end.cpu.user - probe.start.cpu.user, system: probe.end.cpu.system - probe.start.cpu.system }
  return {
    windowMs: to - from,
    sections: inWindow.length,
    cpuPerSection: (cpu.user + cpu.system) / 1000 / inWindow.length,
    cpuShare: (cpu.user + cpu.system) / 1000 / (to - from),
    perContender,
    sectionsPerSecond: inWindow.length / seconds,
    fairness: jain(perContender),
    longestWaitMs: Math.max(...waits),
    serverCommands,
    roundTrips,
    sessionRoundTrips,
    waiterCommandsPerSecond: (serverCommands - inWindow.length * commandsPerPair - sessionCommands) / seconds,
    waiterRoundTripsPerSecond: (roundTrips - sessionRoundTrips - 2 * inWindow.length) / seconds,
    sessionCommandsPerSecond: sessionCommands / seconds,
    foreignScripts: foreignScripts(probe.start.reading.stats, probe.end.reading.stats)
  }
}

const WORK_MS = 1

/**
 * One measuring window of the contended run: `contend` runs every contender from `start` (warm-up
 * first) until `to`, recording each section; the probe reads the window's edges meanwhile.
 */
export const contendedWindow = async (
  ctx: Context,
  connections: string,
  costs: { readonly commandsPerPair: number; readonly commandsPerKeepAlive: number },
  contend: (start: number, to: number, sections: Array<Section>) => Promise<unknown>
): Promise<ContendedResult> => {
  const start = now() + 20
  const from = start + CONTENDED_WARMUP_MS
  const to = from + CONTENDED_WINDOW_MS
  const sections: Array<Section> = []
  const probe = windowProbe(ctx, connections, from, to)
  await contend(start, to, sections)
  return contendedResult(sections, await probe, costs.commandsPerPair, costs.commandsPerKeepAlive)
}

/** Contenders on `withLock`s (Simba's clients, the shell-shape floor): take `name`, work `WORK_MS`, again. */
export const contendWithLocks = (withLocks: ReadonlyArray<WithLock>, name: string) =>
(start: number, to: number, sections: Array<Section>) =>
  Effect.runPromise(Effect.forEach(withLocks, (withLock, i) =>
    Effect.gen(function*() {
      yield* Effect.promise(() => sleepUntil(start))
      while (now() < to) {
        const asked = now()
        yield* withLock(
          name,
          Effect.suspend(() => {
            sections.push({ contender: i, asked, held: now() })
            return Effect.promise(() => sleep(WORK_MS))
          })
        )
      }
    }), { concurrency: "unbounded", discard: true }))

/** Contenders on promise locks (the peers, the bare-scripts floor): the same loop. */
export const contendWithAcquires = (acquires: ReadonlyArray<Peer["acquire"]>, name: string) =>
(start: number, to: number, sections: Array<Section>) =>
  Promise.all(acquires.map(async (acquire, i) => {
    await sleepUntil(start)
    while (now() < to) {
      const asked = now()
      const release = await acquire(name)
      sections.push({ contender: i, asked, held: now() })
      await sleep(WORK_MS)
      await release()
    }
  }))

export const contendedSimba = async (
  ctx: Context,
  costs: { readonly commandsPerPair: number; readonly commandsPerKeepAlive: number }
): Promise<ContendedResult> => {
  const scope = await newScope()
  try {
    const connections = `${ctx.prefix}-simba-c`
    const handles = await inScope(
      scope,
      Effect.forEach(
        Array.from({ length: CONTENDERS }, (_, i) => i),
        (i) => simbaClient(ctx, `${connections}${i}`),
        { concurrency: "unbounded" }
      )
    )
    return await contendedWindow(
      ctx,
      connections,
      costs,
      contendWithLocks(handles.map(({ client }) => (name, body) => client.withLock(name, body)), "contended")
    )
  } finally {
    await closeScope(scope)
  }
}

export const contendedPeer = async (
  ctx: Context,
  kind: PeerKind,
  tuning: Tuning,
  costs: { readonly commandsPerPair: number }
): Promise<ContendedResult> => {
  const connections = `${ctx.prefix}-${kind}-${tuning}-c`
  const peers = await Promise.all(
    Array.from({ length: CONTENDERS }, (_, i) => makePeer(ctx, kind, tuning, `${connections}${i}`))
  )
  try {
    return await contendedWindow(
      ctx,
      connections,
      { commandsPerPair: costs.commandsPerPair, commandsPerKeepAlive: 0 },
      contendWithAcquires(peers.map((peer) => peer.acquire), `contended-${tuning}`)
    )
  } finally {
    await Promise.all(peers.map((peer) => peer.close()))
  }
}

// -------------------------------------------------------------------------------------------------
// renew
// -------------------------------------------------------------------------------------------------

export const LEASES = 1000
const RENEW_SETTLE_MS = 500
const RENEW_WINDOW_MS = 10_000

export interface RenewResult {
  readonly windowMs: number
  readonly roundTrips: number
  readonly serverCommands: number
  readonly roundTripsPerSecond: number
  readonly serverCommandsPerSecond: number
  /** The library's own renewal period for one lease, ms. */
  readonly periodMs: number
  /** Round trips per that period. */
  readonly roundTripsPerPeriod: number
  /** Leases still held at the end (all of them, or the measurement is void). */
  readonly heldAtEnd: number
  /** Scripts other clients of the server ran during the window (0: the server counts are ours alone). */
  readonly foreignScripts: number
}

const renewResult = (probe: Awaited<ReturnType<typeof windowProbe>>, periodMs: number, heldAtEnd: number): RenewResult => {
  const windowMs = probe.end.reading.at - probe.start.reading.at
  const roundTrips = probe.end.rt.total - probe.start.rt.total
  const serverCommands = serverDelta(probe.start.reading.server, probe.end.reading.server)
  const roundTripsPerSecond = roundTrips / (windowMs / 1000)
  return {
    windowMs,
    roundTrips,
    serverCommands,
    roundTripsPerSecond,
    serverCommandsPerSecond: serverCommands / (windowMs / 1000),
    periodMs,
    roundTripsPerPeriod: roundTripsPerSecond * (periodMs / 1000),
    heldAtEnd,
    foreignScripts: foreignScripts(probe.start.reading.stats, probe.end.reading.stats)
  }
}

export const renewSimba = async (ctx: Context): Promise<RenewResult> => {
  const scope = await newScope()
  try {
    const connection = `${ctx.prefix}-simba-renew`
    const { client } = await inScope(scope, simbaClient(ctx, connection))
    const holding = await newScope()
    await inScope(
      holding,
      holdLocks(client, "renew", LEASES, "unbounded")
    )
    const from = now() + RENEW_SETTLE_MS
    const probe = await windowProbe(ctx, connection, from, from + RENEW_WINDOW_MS)
    const held = await Effect.runPromise(leadersOf(client))
    await closeScope(holding)
    return renewResult(probe, simbaRenewInterval(), held)
  } finally {
    await closeScope(scope)
  }
}

export const renewPeer = async (ctx: Context, kind: PeerKind): Promise<RenewResult> => {
  const connection = `${ctx.prefix}-${kind}-renew`
  const redis = await newRedis(connection)
  try {
    const periodMs = kind === "redlock" ? redlockExtendPeriod : mutexRefreshPeriod
    let stop: () => void = () => {}
    const stopped = new Promise<void>((resolve) => {
      stop = resolve
    })
    let held = 0
    let lost = 0
    const holders: Array<Promise<void>> = []
    // Acquire spread evenly over one renewal period, so that renewals come at a steady rate.
    const t0 = now()
    if (kind === "redlock") {
      const redlock = new Redlock([redis], redlockSettings("defaults"))
      for (let i = 0; i < LEASES; i++) {
        await sleepUntil(t0 + (i * periodMs) / LEASES)
        // `using` is redlock's auto-extending form: it extends the lock while the routine runs.
        holders.push(
          redlock.using([`${ctx.prefix}:redlock:renew-${i}`], LEASE_MS, async (signal) => {
            held++
            await stopped
            if (signal.aborted) lost++
          })
        )
      }
    } else {
      for (let i = 0; i < LEASES; i++) {
        await sleepUntil(t0 + (i * periodMs) / LEASES)
        const mutex = new Mutex(redis, `${ctx.prefix}:mutex:renew-${i}`, {
          ...mutexOptions("defaults"),
          onLockLost: () => {
            lost++
          }
        })
        holders.push(
          mutex.acquire().then(async () => {
            held++
            await stopped
            await mutex.release()
          })
        )
      }
    }
    const from = now() + RENEW_SETTLE_MS
    const probe = await windowProbe(ctx, connection, from, from + RENEW_WINDOW_MS)
    const heldAtEnd = held - lost
    stop()
    await Promise.all(holders)
    return renewResult(probe, periodMs, heldAtEnd)
  } finally {
    await quit(redis)
  }
}

// -------------------------------------------------------------------------------------------------
// renew: server commands of one renewal
// -------------------------------------------------------------------------------------------------

/** The row's metric, for `run.ts`. */
export const renewCommandsMetric = "Redis commands per renewal, 1,000 unchanged leases (server count, in-script included)"

export interface RenewCommandsResult {
  /**
   * Server commands of one `keepAlive` of a session holding `LEASES` leases, naming the version it
   * knows (the set unchanged): least of 5 batches of 10, per renewal.
   */
  readonly unchanged: number
  /** The same renewal without a known version (the full list): least of 5 batches of 2, per renewal. */
  readonly listed: number
}

/**
 * One session on the backend alone (no client, no engine), `LEASES` leases, then the renewal that
 * names the current version against the one that lists every lease. Runs alone in a few seconds:
 * `tsx bench/redis.ts renew-commands`.
 */
export const renewCommandsSimba = async (ctx: Context): Promise<RenewCommandsResult> => {
  const scope = await newScope()
  try {
    const backend = await inScope(scope, simbaBackend(ctx, `${ctx.prefix}-simba-renew-commands`))
    const ttl = Duration.millis(LEASE_MS)
    const { sessionId } = await Effect.runPromise(backend.openSession(ttl))
    await Effect.runPromise(
      Effect.forEach(Array.from({ length: LEASES }, (_, i) => `renew-commands-${i}`), (name) => backend.acquire(sessionId, name), {
        concurrency: 16,
        discard: true
      })
    )
    const renew = async (known: string | undefined) => {
      const reply = await Effect.runPromise(backend.keepAlive(sessionId, ttl, known))
      if (reply._tag !== "Live") throw new Error("the session expired during the renew-commands bench")
      return reply
    }
    const first = await renew(undefined)
    if (first.leases?.length !== LEASES) throw new Error(`expected ${LEASES} leases, the renewal lists ${first.leases?.length}`)
    const renewing = (known: string | undefined) => async (batch: number) => {
      for (let i = 0; i < batch; i++) await renew(known)
    }
    const unchanged = await calibrate(ctx, 10, renewing(first.version))
    const listed = await calibrate(ctx, 2, renewing(undefined))
    await Effect.runPromise(backend.closeSession(sessionId))
    return { unchanged, listed }
  } finally {
    await closeScope(scope)
  }
}

// -------------------------------------------------------------------------------------------------
// handover
// -------------------------------------------------------------------------------------------------

export const HANDOVERS = 50
export const HANDOVER_WARMUP = 5

export interface HandoverResult {
  /** Holder starts releasing → waiter holds, ms. */
  readonly samples: ReadonlyArray<number>
  /**
   * Simba only, for the diagnosis: holder starts releasing → a plain subscriber connection hears the
   * hand-off message its release script publishes on the waiter's session channel (that is, the
   * release has run in Redis), ms.
   */
  readonly releasedInRedis?: ReadonlyArray<number>
  /**
   * Simba only: the same hand-over with `withLock` on both sides, from the holder's body's end to the
   * start of the waiter's (the measure of the shell-shape floor's row, `floors/redis.ts`), ms.
   */
  readonly withLockBodies?: ReadonlyArray<number>
  /** Round trips the waiter's connection(s) sent while waiting, per second of waiting. */
  readonly waiterRoundTripsPerSecond: number
  /** The same, per handover (a waiter woken by a push sends 2 whatever the wait: its first try and the winning one). */
  readonly waiterRoundTripsPerHandover: number
}

export const handoverSimba = async (ctx: Context): Promise<HandoverResult> => {
  const scope = await newScope()
  try {
    const waiterConnection = `${ctx.prefix}-simba-hw`
    const [holder, waiter] = await inScope(
      scope,
      Effect.all([simbaClient(ctx, `${ctx.prefix}-simba-hh`), simbaClient(ctx, waiterConnection)], {
        concurrency: "unbounded"
      })
    )
    const listener = await newRedis(`${ctx.prefix}-simba-hl`)
    // By lease name: a hand-off grant is told on the waiter's session channel (`granted:<token>:<name>`),
    // a plain release on the lease's.
    const keys = RedisBackend.keys(`${ctx.prefix}:simba`)
    const heard = new Map<string, number>()
    listener.on("pmessage", (_pattern: string, channel: string, message: string) => {
      const name = channel.startsWith(keys.leasePrefix)
        ? channel.slice(keys.leasePrefix.length, -1)
        : message.startsWith("granted:")
        ? message.slice(message.indexOf(":", 8) + 1)
        : undefined
      if (name !== undefined && !heard.has(name)) heard.set(name, now())
    })
    await listener.psubscribe(`${keys.leasePrefix}*`, `${keys.sessionPrefix}*`)
    const samples: Array<number> = []
    const releasedInRedis: Array<number> = []
    let waited = 0
    let waiterRoundTrips = 0
    for (let i = 0; i < HANDOVER_WARMUP + HANDOVERS; i++) {
      const name = `handover-${i}`
      const holding = await newScope()
      await inScope(holding, holder.client.lock(name))
      const acquired = await Effect.runPromise(Deferred.make<{ readonly at: number; readonly rt: number }>())
      const done = await Effect.runPromise(Deferred.make<void>())
      const asked = now()
      const rt0 = roundTrips(waiterConnection).total
      const fiber = Effect.runFork(
        Effect.scoped(
          Effect.gen(function*() {
            yield* waiter.client.lock(name)
            yield* Deferred.succeed(acquired, { at: now(), rt: roundTrips(waiterConnection).total })
            yield* Deferred.await(done)
          })
        )
      )
      await sleep(waitBeforeRelease())
      const [released, got] = await Effect.runPromise(
        Effect.gen(function*() {
          const t0 = now()
          yield* Scope.close(holding, Exit.void)
          return [t0, yield* Deferred.await(acquired)] as const
        })
      )
      await Effect.runPromise(Effect.zipRight(Deferred.succeed(done, undefined), Fiber.join(fiber)))
      if (i >= HANDOVER_WARMUP) {
        samples.push(got.at - released)
        releasedInRedis.push((heard.get(name) ?? Number.NaN) - released)
        waited += got.at - asked
        waiterRoundTrips += got.rt - rt0
      }
    }
    await quit(listener)
    const withLockBodies = await handoverOfBodies(
      (name, body) => holder.client.withLock(name, body),
      (name, body) => waiter.client.withLock(name, body),
      "handover-wl"
    )
    return {
      samples,
      releasedInRedis,
      withLockBodies,
      waiterRoundTripsPerSecond: waiterRoundTrips / (waited / 1000),
      waiterRoundTripsPerHandover: waiterRoundTrips / HANDOVERS
    }
  } finally {
    await closeScope(scope)
  }
}

export type WithLock = (name: string, body: Effect.Effect<void>) => Effect.Effect<unknown, unknown>

/**
 * The hand-over run on two `withLock`s: the holder's body waits, the waiter asks (and queues), then,
 * after the same idle as every hand-over sample, the holder's body ends; the sample is from the
 * holder's body's end to the start of the waiter's, ms.
 */
export const handoverOfBodies = async (holder: WithLock, waiter: WithLock, label: string): Promise<Array<number>> => {
  const samples: Array<number> = []
  for (let i = 0; i < HANDOVER_WARMUP + HANDOVERS; i++) {
    const name = `${label}-${i}`
    const sample = await Effect.runPromise(Effect.gen(function*() {
      const [holding, release, held, done] = yield* Effect.all([
        Deferred.make<void>(),
        Deferred.make<void>(),
        Deferred.make<void>(),
        Deferred.make<void>()
      ])
      let released = Number.NaN
      let heldAt = Number.NaN
      const holderFiber = yield* Effect.fork(holder(
        name,
        Effect.zipRight(
          Effect.zipRight(Deferred.succeed(holding, undefined), Deferred.await(release)),
          Effect.sync(() => {
            released = now()
          })
        )
      ))
      yield* Deferred.await(holding)
      const waiterFiber = yield* Effect.fork(waiter(
        name,
        Effect.zipRight(
          Effect.sync(() => {
            heldAt = now()
          }),
          Effect.zipRight(Deferred.succeed(held, undefined), Deferred.await(done))
        )
      ))
      yield* Effect.promise(() => sleep(waitBeforeRelease()))
      yield* Deferred.succeed(release, undefined)
      yield* Deferred.await(held)
      yield* Deferred.succeed(done, undefined)
      yield* Fiber.join(holderFiber)
      yield* Fiber.join(waiterFiber)
      return heldAt - released
    }))
    if (i >= HANDOVER_WARMUP) samples.push(sample)
  }
  return samples
}

export const handoverPeer = async (ctx: Context, kind: PeerKind, tuning: Tuning): Promise<HandoverResult> => {
  const waiterConnection = `${ctx.prefix}-${kind}-${tuning}-hw`
  const [holder, waiter] = await Promise.all([
    makePeer(ctx, kind, tuning, `${ctx.prefix}-${kind}-${tuning}-hh`),
    makePeer(ctx, kind, tuning, waiterConnection)
  ])
  try {
    const samples: Array<number> = []
    let waited = 0
    let waiterRoundTrips = 0
    for (let i = 0; i < HANDOVER_WARMUP + HANDOVERS; i++) {
      const name = `handover-${tuning}-${i}`
      const release = await holder.acquire(name)
      const asked = now()
      const rt0 = roundTrips(waiterConnection)
      let got = 0
      let rt = 0
      const waiting = waiter.acquire(name).then((waiterRelease) => {
        got = now()
        rt = roundTripsSince(waiterConnection, rt0).total
        return waiterRelease
      })
      await sleep(waitBeforeRelease())
      const released = now()
      await release()
      const waiterRelease = await waiting
      await waiterRelease()
      if (i >= HANDOVER_WARMUP) {
        samples.push(got - released)
        waited += got - asked
        waiterRoundTrips += rt
      }
    }
    return {
      samples,
      waiterRoundTripsPerSecond: waiterRoundTrips / (waited / 1000),
      waiterRoundTripsPerHandover: waiterRoundTrips / HANDOVERS
    }
  } finally {
    await Promise.all([holder.close(), waiter.close()])
  }
}

export const summary = {
  median,
  p90: (samples: ReadonlyArray<number>) => percentile(samples, 90),
  p99: (samples: ReadonlyArray<number>) => percentile(samples, 99)
}

// `tsx bench/redis.ts renew-commands`: the renew-commands row alone, without the whole bench.
if (process.argv[1] !== undefined && fileURLToPath(import.meta.url) === resolvePath(process.argv[1]) && process.argv[2] === "renew-commands") {
  const prefix = `bench-${randomHex(4)}`
  const monitor = await newRedis(`${prefix}-monitor`)
  try {
    const result = await renewCommandsSimba({ prefix, monitor, log: (line) => process.stderr.write(`bench: ${line}\n`) })
    console.log(`${renewCommandsMetric}: ${result.unchanged.toFixed(1)}`)
    console.log(`the same renewal listing every lease (no known version): ${result.listed.toFixed(1)}`)
  } finally {
    await deleteKeys(monitor, [prefix])
    await quit(monitor)
  }
}
