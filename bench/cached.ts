/**
 * The `cached` section of `npm run bench`: lock caching (`keep`). One client takes the same name again
 * and again (Simba with `keep`; the peers take and release it each time, as they must), on Redis and,
 * for Simba, on the in-memory store; then a second client asking for a lease the first one caches:
 * from its ask to its body's start while no body of the holder runs, and from the end of the holder's
 * running body to the start of the waiter's (the hand-over of `handoverOfBodies`).
 */
import * as Effect from "effect/Effect"
import * as MemoryBackend from "../src/layers/Memory.js"
import * as Simba from "../src/Simba.js"
import * as R from "./redis.js"
import { now, roundTrips, roundTripsSince, sleep, WARMUP } from "./util.js"

/** A peer's bodies per measurement (each a take and a release: two round trips), after `WARMUP` of them. */
export const BODIES = 2_000
/**
 * Simba's cached bodies per measurement, after `WARMUP` of them: a cached body is ~1/10 of a peer's,
 * so this many make a window about as long as the peers'. (2,000 after 2,000 was a window of ~60 ms
 * that measured 184 µs of CPU per body where a steady loop of 20,000 measures 40-50.)
 */
export const CACHED_BODIES = 20_000
const KEEP = "1 second"
/** Times a second client asks for a cached lease. */
export const ASKS = 50

export interface SameNameResult {
  /** Per body (acquire + body + release, or a cached body), ms. */
  readonly samples: ReadonlyArray<number>
  /** Process CPU time per body, ms. */
  readonly cpuPerBody: number
  /** Client round trips per body (session upkeep left out); `undefined` where not counted. */
  readonly roundTripsPerBody: number | undefined
}

const timedBodies = (n: number, body: () => Effect.Effect<unknown, unknown>) =>
  Effect.gen(function*() {
    const samples: Array<number> = []
    for (let i = 0; i < n; i++) {
      const t0 = now()
      yield* body()
      samples.push(now() - t0)
    }
    return samples
  })

/** Simba with `keep` on Redis: one name, `CACHED_BODIES` bodies after `WARMUP` warm-up ones. */
export const sameNameSimba = async (ctx: R.Context): Promise<SameNameResult> => {
  const scope = await R.newScope()
  try {
    const connection = `${ctx.prefix}-simba-k`
    const { client } = await R.inScope(scope, R.simbaClient(ctx, connection))
    const body = () => client.withLock("kept", Effect.void, { keep: KEEP })
    await Effect.runPromise(timedBodies(WARMUP, body))
    const trips = roundTrips(connection)
    const [samples, cpuPerBody] = await R.withCpu(CACHED_BODIES, () => Effect.runPromise(timedBodies(CACHED_BODIES, body)))
    const during = roundTripsSince(connection, trips)
    return { samples, cpuPerBody, roundTripsPerBody: (during.total - during.session) / CACHED_BODIES }
  } finally {
    await R.closeScope(scope)
  }
}

/** Simba with `keep` on the in-memory store. */
export const sameNameMemory = async (): Promise<SameNameResult> => {
  const program = Effect.gen(function*() {
    const client = yield* Simba.make(R.simbaSettings)
    const body = () => client.withLock("kept", Effect.void, { keep: KEEP })
    yield* timedBodies(WARMUP, body)
    const before = process.cpuUsage()
    const samples = yield* timedBodies(CACHED_BODIES, body)
    const used = process.cpuUsage(before)
    return { samples, cpuPerBody: (used.user + used.system) / 1000 / CACHED_BODIES, roundTripsPerBody: undefined }
  })
  return Effect.runPromise(Effect.scoped(Effect.provide(program, MemoryBackend.layer())))
}

/** A peer taking and releasing one name again and again. */
export const sameNamePeer = async (ctx: R.Context, kind: R.PeerKind): Promise<SameNameResult> => {
  const connection = `${ctx.prefix}-${kind}-k`
  const peer = await R.makePeer(ctx, kind, "defaults", connection)
  try {
    const pair = async () => {
      const release = await peer.acquire("kept")
      await release()
    }
    await R.timeSequential(WARMUP, 0, pair)
    const trips = roundTrips(connection)
    const [samples, cpuPerBody] = await R.withCpu(BODIES, () => R.timeSequential(BODIES, 0, pair))
    return { samples, cpuPerBody, roundTripsPerBody: roundTripsSince(connection, trips).total / BODIES }
  } finally {
    await peer.close()
  }
}

export interface AskedResult {
  /** A second client asks for a lease the first caches (no body runs): ask → its body starts, ms. */
  readonly askToBody: ReadonlyArray<number>
  /** The holder's body (with `keep`) ends while the second client waits → the waiter's body starts, ms. */
  readonly bodyToBody: ReadonlyArray<number>
}

/** Two Simba clients on Redis: the holder caches with `keep`, the other asks. */
export const askedSimba = async (ctx: R.Context): Promise<AskedResult> => {
  const scope = await R.newScope()
  try {
    const [holder, waiter] = await R.inScope(
      scope,
      Effect.all([R.simbaClient(ctx, `${ctx.prefix}-simba-kh`), R.simbaClient(ctx, `${ctx.prefix}-simba-kw`)], {
        concurrency: "unbounded"
      })
    )
    const askToBody: Array<number> = []
    for (let i = 0; i < R.HANDOVER_WARMUP + ASKS; i++) {
      const name = `asked-${i}`
      await Effect.runPromise(holder.client.withLock(name, Effect.void, { keep: KEEP }))
      await sleep(5)
      const asked = now()
      const started = await Effect.runPromise(waiter.client.withLock(name, Effect.sync(now)))
      if (i >= R.HANDOVER_WARMUP) askToBody.push(started - asked)
    }
    const bodyToBody = await R.handoverOfBodies(
      (name, body) => holder.client.withLock(name, body, { keep: KEEP }),
      (name, body) => waiter.client.withLock(name, body),
      "asked-wl"
    )
    return { askToBody, bodyToBody }
  } finally {
    await R.closeScope(scope)
  }
}
