/**
 * The Redis floors of `npm run bench`: the uncontended, contended and hand-over runs of `../redis.ts`
 * on the two floors of `shape.ts`, so that a figure of Simba's splits into what its protocol costs
 * (floor 1: Simba's scripts through bare ioredis, no client) and what the client's prescribed shape
 * costs (floor 2: the shell shape on the `LeaseBackend`, no engine); the rest is the engine and its
 * bookkeeping. Their rows are in `bench/results.json` beside Simba's; `bench/report.ts` puts them in
 * the floor table of docs/performance.md.
 */
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Scope from "effect/Scope"
import {
  closeScope,
  CONTENDERS,
  type ContendedResult,
  contendedWindow,
  contendWithAcquires,
  contendWithLocks,
  type Context,
  HANDOVER_WARMUP,
  handoverOfBodies,
  HANDOVERS,
  inScope,
  LEASE_MS,
  newScope,
  RUNS,
  simbaBackend,
  timeSequential,
  withCpu
} from "../redis.js"
import { newRedis, now, quit, sleep, waitBeforeRelease, WARMUP } from "../util.js"
import * as Shape from "./shape.js"

/**
 * Sessions for the floors: a backend of their own each (its two connections, its hints), sessions
 * long enough to outlive a run without renewals.
 */
const floorSessions = (ctx: Context, label: string, n: number) =>
  Effect.forEach(
    Array.from({ length: n }, (_, i) => i),
    (i) =>
      Effect.gen(function*() {
        const backend = yield* simbaBackend(ctx, `${ctx.prefix}-${label}${i}`)
        const { sessionId } = yield* backend.openSession(Duration.millis(LEASE_MS * 20))
        return { backend, sessionId }
      }),
    { concurrency: "unbounded" }
  )

/** Floor 1 under a Redis lock that waits: `Shape.bareLocker`s on sessions of `floorSessions`. */
const bareLockers = async (ctx: Context, scope: Scope.CloseableScope, label: string, n: number) => {
  const sessions = await inScope(scope, floorSessions(ctx, `${label}s`, n))
  const lockers: Array<Shape.BareLocker> = []
  for (const [i, { sessionId }] of sessions.entries()) {
    const [redis, subscriber] = await Promise.all([newRedis(`${ctx.prefix}-${label}${i}`), newRedis(`${ctx.prefix}-${label}${i}:hints`)])
    await Effect.runPromise(Scope.addFinalizer(scope, Effect.promise(() => Promise.all([quit(redis), quit(subscriber)]))))
    lockers.push(await Shape.bareLocker(redis, subscriber, `${ctx.prefix}:simba`, sessionId))
  }
  return lockers
}

/** Floor 2: the prescribed shell shape without the engine (`Shape.shellShape`) on sessions of `floorSessions`. */
const shapedLockers = (ctx: Context, scope: Scope.CloseableScope, label: string, n: number) =>
  inScope(
    scope,
    Effect.flatMap(
      floorSessions(ctx, label, n),
      (sessions) => Effect.forEach(sessions, ({ backend, sessionId }) => Shape.shellShape(backend, sessionId))
    )
  )

// -------------------------------------------------------------------------------------------------
// uncontended
// -------------------------------------------------------------------------------------------------

export interface UncontendedFloors {
  /** Simba's two scripts through bare ioredis, no Effect: acquire + release, ms, 2,000 timed runs. */
  readonly scriptsBare: ReadonlyArray<number>
  readonly scriptsBareCpuPerPair: number
  /** The prescribed shell shape over a `LeaseBackend`, without Simba's engine: the same. */
  readonly shellShape: ReadonlyArray<number>
  readonly shellShapeCpuPerPair: number
}

/**
 * Both floors of an uncontended acquire + release on one backend's session, `WARMUP` + `RUNS` timed
 * runs each on fresh names, with nothing else of Simba alive in the process (run it after
 * `uncontendedSimba`, whose clients are closed by then).
 */
export const uncontendedFloors = async (ctx: Context): Promise<UncontendedFloors> => {
  const scope = await newScope()
  try {
    const backend = await inScope(scope, simbaBackend(ctx, `${ctx.prefix}-floor-u`))
    const { sessionId } = await Effect.runPromise(backend.openSession(Duration.millis(LEASE_MS * 20)))
    // One pair through the backend first (it loaded the function library the bare floor calls).
    await Effect.runPromise(Effect.flatMap(backend.acquire(sessionId, "floor-u-load"), (reply) =>
      reply._tag === "Granted" ? backend.release(sessionId, "floor-u-load", reply.token) : Effect.dieMessage(`not granted: ${reply._tag}`)))
    let scriptsBare: ReadonlyArray<number>
    let scriptsBareCpuPerPair: number
    const bare = await newRedis(`${ctx.prefix}-floor-u-bare`)
    try {
      const pair = Shape.scriptsBare(bare, `${ctx.prefix}:simba`, sessionId)
      await timeSequential(WARMUP, 0, (i) => pair(`sb-warm-${i}`))
      ;[scriptsBare, scriptsBareCpuPerPair] = await withCpu(RUNS, () => timeSequential(RUNS, 0, (i) => pair(`sb-${i}`)))
    } finally {
      await quit(bare)
    }
    const shaped = await newScope()
    try {
      const withLock = await inScope(shaped, Shape.shellShape(backend, sessionId))
      const timed = (label: string, n: number) =>
        Effect.gen(function*() {
          const samples: Array<number> = []
          for (let i = 0; i < n; i++) {
            const t0 = now()
            yield* withLock(`${label}-${i}`, Effect.void)
            samples.push(now() - t0)
          }
          return samples
        })
      await Effect.runPromise(timed("sh-warm", WARMUP))
      const [shellShape, shellShapeCpuPerPair] = await withCpu(RUNS, () => Effect.runPromise(timed("sh", RUNS)))
      await Effect.runPromise(backend.closeSession(sessionId))
      return { scriptsBare, scriptsBareCpuPerPair, shellShape, shellShapeCpuPerPair }
    } finally {
      await closeScope(shaped)
    }
  } finally {
    await closeScope(scope)
  }
}

// -------------------------------------------------------------------------------------------------
// contended
// -------------------------------------------------------------------------------------------------

export interface ContendedFloors {
  /** The contended run on `Shape.bareLocker`s: Simba's scripts and fair hand-off, no client. */
  readonly scriptsBare: ContendedResult
  /** The same on `Shape.shellShape`: the prescribed shell shape, no engine. */
  readonly shellShape: ContendedResult
}

/** The contended run (`CONTENDERS` contenders, one name, 1 ms sections) on the two floors. */
export const contendedFloors = async (ctx: Context): Promise<ContendedFloors> => {
  // Server counts are not split into pairs and renewals here: only the sections, CPU and waits are read.
  const noCosts = { commandsPerPair: 0, commandsPerKeepAlive: 0 }
  let scriptsBare: ContendedResult
  const bareScope = await newScope()
  try {
    const lockers = await bareLockers(ctx, bareScope, "floor-cb", CONTENDERS)
    const acquires = lockers.map((locker) => async (name: string) => {
      const token = await locker.lock(name)
      return () => locker.unlock(name, token)
    })
    scriptsBare = await contendedWindow(ctx, `${ctx.prefix}-floor-cb`, noCosts, contendWithAcquires(acquires, "contended"))
  } finally {
    await closeScope(bareScope)
  }
  const shapeScope = await newScope()
  try {
    const lockers = await shapedLockers(ctx, shapeScope, "floor-cs", CONTENDERS)
    const shellShape = await contendedWindow(ctx, `${ctx.prefix}-floor-cs`, noCosts, contendWithLocks(lockers, "contended"))
    return { scriptsBare, shellShape }
  } finally {
    await closeScope(shapeScope)
  }
}

// -------------------------------------------------------------------------------------------------
// hand-over
// -------------------------------------------------------------------------------------------------

export interface HandoverFloors {
  /** Holder starts releasing → waiter holds, ms, on `Shape.bareLocker`s (Simba's scripts, no client). */
  readonly scriptsBare: ReadonlyArray<number>
  /** The same on `Shape.shellShape` (the prescribed shape, no engine): the holder's body ends → the waiter's starts. */
  readonly shellShape: ReadonlyArray<number>
}

/** The hand-over run (a waiter queued, the same idle, then the release) on the two floors. */
export const handoverFloors = async (ctx: Context): Promise<HandoverFloors> => {
  const scriptsBare: Array<number> = []
  const bareScope = await newScope()
  try {
    const [holder, waiter] = await bareLockers(ctx, bareScope, "floor-hb", 2)
    for (let i = 0; i < HANDOVER_WARMUP + HANDOVERS; i++) {
      const name = `floor-hb-${i}`
      const token = await holder!.lock(name)
      let heldAt = Number.NaN
      const waited = waiter!.lock(name).then((token) => {
        heldAt = now()
        return token
      })
      await sleep(waitBeforeRelease())
      const t0 = now()
      await holder!.unlock(name, token)
      await waiter!.unlock(name, await waited)
      if (i >= HANDOVER_WARMUP) scriptsBare.push(heldAt - t0)
    }
  } finally {
    await closeScope(bareScope)
  }
  const shapeScope = await newScope()
  try {
    const [holder, waiter] = await shapedLockers(ctx, shapeScope, "floor-hs", 2)
    return { scriptsBare, shellShape: await handoverOfBodies(holder!, waiter!, "floor-hs") }
  } finally {
    await closeScope(shapeScope)
  }
}
