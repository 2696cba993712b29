/**
 * The `holds` section of `npm run bench`: Simba's semaphore and read-write lock on Redis, beside
 * redis-semaphore's `Semaphore` and `MultiSemaphore` on the same Redis, in one process:
 * - uncontended: one client takes 1 permit of a 3-permit semaphore and gives it back, again and again
 *   (Simba's `withLock` on the same run, for the ratio the client path reaches for locks);
 * - contended: 8 contenders on a semaphore of 3 permits, each taking 1 permit, working 1 ms, giving
 *   it back, for 10 s: throughput, fairness (Jain's index of the contenders' sections), the longest
 *   wait, the waiters' round trips per section;
 * - read-write (Simba only: redis-semaphore has none): 6 readers and 2 writers, each taking its lock
 *   again and again (1 ms of work; a writer then pauses 5 ms) for 10 s: reads/s, writes/s, a writer's
 *   longest wait.
 * The peers run at their defaults (`retryInterval` 10 ms) with `lockTimeout` 3 s and an acquire
 * timeout of an hour, as the lock rows do.
 */
import * as Effect from "effect/Effect"
import { MultiSemaphore, Semaphore } from "redis-semaphore"
import * as R from "./redis.js"
import { newRedis, now, quit, roundTrips, roundTripsSince, sleep, sleepUntil, WARMUP } from "./util.js"

export const LIMIT = 3
const peerOptions = { lockTimeout: R.LEASE_MS, acquireTimeout: 3_600_000 }

export type SemaphorePeer = "semaphore" | "multiSemaphore"

export interface UncontendedHolds {
  readonly samples: ReadonlyArray<number>
  readonly cpuPerPair: number
  readonly roundTripsPerPair: number
}

const timed = async (n: number, op: () => Promise<unknown>): Promise<Array<number>> => {
  const samples: Array<number> = []
  for (let i = 0; i < n; i++) {
    const t0 = now()
    await op()
    samples.push(now() - t0)
  }
  return samples
}

const measured = async (connection: string, op: () => Promise<unknown>): Promise<UncontendedHolds> => {
  await timed(WARMUP, op)
  const trips = roundTrips(connection)
  const [samples, cpuPerPair] = await R.withCpu(R.RUNS, () => timed(R.RUNS, op))
  const during = roundTripsSince(connection, trips)
  return { samples, cpuPerPair, roundTripsPerPair: (during.total - during.session) / R.RUNS }
}

/** Simba: `withPermits` (1 of 3) and, on the same client, `withLock`, each again and again. */
export const uncontendedSimba = async (ctx: R.Context): Promise<{ readonly permits: UncontendedHolds; readonly lock: UncontendedHolds }> => {
  const scope = await R.newScope()
  try {
    const connection = `${ctx.prefix}-simba-hu`
    const { client } = await R.inScope(scope, R.simbaClient(ctx, connection))
    const permits = await measured(connection, () => Effect.runPromise(client.withPermits("sem-u", 1, Effect.void, { limit: LIMIT })))
    const lock = await measured(connection, () => Effect.runPromise(client.withLock("lock-u", Effect.void)))
    return { permits, lock }
  } finally {
    await R.closeScope(scope)
  }
}

const peerSemaphore = (kind: SemaphorePeer, redis: Awaited<ReturnType<typeof newRedis>>, key: string) =>
  kind === "semaphore" ? new Semaphore(redis, key, LIMIT, peerOptions) : new MultiSemaphore(redis, key, LIMIT, 1, peerOptions)

export const uncontendedPeer = async (ctx: R.Context, kind: SemaphorePeer): Promise<UncontendedHolds> => {
  const connection = `${ctx.prefix}-${kind}-hu`
  const redis = await newRedis(connection)
  try {
    const key = `${ctx.prefix}:${kind}:sem-u`
    return await measured(connection, async () => {
      const semaphore = peerSemaphore(kind, redis, key)
      await semaphore.acquire()
      await semaphore.release()
    })
  } finally {
    await quit(redis)
  }
}

/** 8 Simba clients on one semaphore of 3 permits. */
export const contendedSimba = async (ctx: R.Context): Promise<R.ContendedResult> => {
  const scope = await R.newScope()
  try {
    const connections = `${ctx.prefix}-simba-hc`
    const handles = await R.inScope(
      scope,
      Effect.forEach(Array.from({ length: R.CONTENDERS }, (_, i) => i), (i) => R.simbaClient(ctx, `${connections}${i}`), {
        concurrency: "unbounded"
      })
    )
    return await R.contendedWindow(
      ctx,
      connections,
      { commandsPerPair: 0, commandsPerKeepAlive: 0 },
      R.contendWithLocks(handles.map(({ client }) => (name, body) => client.withPermits(name, 1, body, { limit: LIMIT })), "sem-c")
    )
  } finally {
    await R.closeScope(scope)
  }
}

/** 8 peers (one connection each) on one semaphore of 3 permits. */
export const contendedPeer = async (ctx: R.Context, kind: SemaphorePeer): Promise<R.ContendedResult> => {
  const connections = `${ctx.prefix}-${kind}-hc`
  const redises = await Promise.all(Array.from({ length: R.CONTENDERS }, (_, i) => newRedis(`${connections}${i}`)))
  try {
    const key = `${ctx.prefix}:${kind}:sem-c`
    return await R.contendedWindow(
      ctx,
      connections,
      { commandsPerPair: 0, commandsPerKeepAlive: 0 },
      R.contendWithAcquires(redises.map((redis) => async () => {
        const semaphore = peerSemaphore(kind, redis, key)
        await semaphore.acquire()
        return () => semaphore.release()
      }), "sem-c")
    )
  } finally {
    await Promise.all(redises.map(quit))
  }
}

export interface ReadWriteResult {
  readonly readsPerSecond: number
  readonly writesPerSecond: number
  readonly longestWriterWaitMs: number
  readonly medianWriterWaitMs: number
}

const RW_WARMUP_MS = 500
const RW_WINDOW_MS = 10_000
const READERS = 6
const WRITERS = 2

/** 6 readers and 2 writers (each its own Simba client) on one read-write lock. */
export const readWrite = async (ctx: R.Context): Promise<ReadWriteResult> => {
  const scope = await R.newScope()
  try {
    const connections = `${ctx.prefix}-simba-rw`
    const handles = await R.inScope(
      scope,
      Effect.forEach(Array.from({ length: READERS + WRITERS }, (_, i) => i), (i) => R.simbaClient(ctx, `${connections}${i}`), {
        concurrency: "unbounded"
      })
    )
    const start = now() + 20
    const from = start + RW_WARMUP_MS
    const to = from + RW_WINDOW_MS
    let reads = 0
    let writes = 0
    const writerWaits: Array<number> = []
    await Promise.all(handles.map(async ({ client }, i) => {
      await sleepUntil(start)
      const writer = i >= READERS
      while (now() < to) {
        const asked = now()
        const body = Effect.promise(async () => {
          const held = now()
          if (held >= from && held < to) {
            if (writer) {
              writes++
              writerWaits.push(held - asked)
            } else reads++
          }
          await sleep(1)
        })
        await Effect.runPromise(writer ? client.withWriteLock("rw", body) : client.withReadLock("rw", body))
        if (writer) await sleep(5)
      }
    }))
    const seconds = (to - from) / 1000
    return {
      readsPerSecond: reads / seconds,
      writesPerSecond: writes / seconds,
      longestWriterWaitMs: Math.max(...writerWaits),
      medianWriterWaitMs: R.summary.median(writerWaits)
    }
  } finally {
    await R.closeScope(scope)
  }
}

