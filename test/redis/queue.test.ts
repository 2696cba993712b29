/**
 * The Redis waiter queue stays bounded: a waiter that stops waiting (a `withLock` that times out, an
 * interrupted waiter, a closed client) leaves the queue (the engine's `Withdraw`), and the scripts
 * examine at most `queueScanBatch` entries per call, so a release behind 50,000 abandoned waiters
 * stays a short script (read from SLOWLOG on a private server). Real time, unique names.
 */
import { describe, expect, it } from "@effect/vitest"
import { Deferred, Duration, Effect, Fiber, Schedule } from "effect"
import { randomBytes } from "node:crypto"
import { LeaseBackend, Simba } from "simba"
import { RedisBackend } from "simba/redis"
import { library, queueScanBatch, release as releaseScript } from "../../src/layers/redis/scripts.js"
import { clientTiming, modes, privateServer, type RawClient, rawClient, uniqueName } from "./RedisServers.js"

const k = RedisBackend.keys()

/** Polls `read` every 10 ms until `until` holds (at most 5 s, a few renewal periods of `clientTiming`). */
const eventually = <A>(read: Effect.Effect<A>, until: (a: A) => boolean): Effect.Effect<A, unknown> =>
  read.pipe(
    Effect.filterOrFail(until, () => "not yet"),
    Effect.retry(Schedule.spaced("10 millis")),
    Effect.timeout("5 seconds")
  )

const queueOf = (raw: RawClient, name: string) => Effect.promise(() => raw.zrange(k.leaseQueue(name), 0, -1))
const scoreOf = (raw: RawClient, name: string, sid: string) => Effect.promise(() => raw.zscore(k.leaseQueue(name), sid))

for (const mode of modes) {
  describe(`Redis waiter queue: waiters that stop waiting leave it, ${mode.label}`, () => {
    const client = Effect.flatMap(RedisBackend.make(mode.options), (backend) =>
      Simba.make(clientTiming).pipe(Effect.provideService(LeaseBackend.LeaseBackend, backend)))

    /** A holder of `name` until the scope closes, a waiter client, and the waiter's queued session id. */
    const contended = (name: string) =>
      Effect.gen(function*() {
        const raw = yield* rawClient(mode.cluster)
        const holder = yield* client
        const held = yield* Deferred.make<void>()
        yield* Effect.forkScoped(holder.withLock(name, Effect.zipRight(Deferred.succeed(held, undefined), Effect.never)))
        yield* Deferred.await(held)
        return { raw, waiter: yield* client }
      })
    const queued = (raw: RawClient, name: string) =>
      Effect.map(eventually(queueOf(raw, name), (q) => q.length === 1), (q) => q[0]!)
    const left = (raw: RawClient, name: string, sid: string) =>
      eventually(scoreOf(raw, name, sid), (score) => score === null)

    it.scopedLive("a withLock that times out leaves the queue (ZSCORE nil after)", () =>
      Effect.gen(function*() {
        const name = uniqueName("timeout")
        const { raw, waiter } = yield* contended(name)
        const waiting = yield* Effect.fork(waiter.withLock(name, Effect.void, { timeout: "1 second" }))
        const sid = yield* queued(raw, name)
        const error = yield* Fiber.join(waiting).pipe(Effect.flip)
        expect(error._tag).toBe("LockTimeoutError")
        expect(yield* left(raw, name, sid)).toBeNull()
      }))

    it.scopedLive("an interrupted waiter leaves the queue", () =>
      Effect.gen(function*() {
        const name = uniqueName("interrupt")
        const { raw, waiter } = yield* contended(name)
        const waiting = yield* Effect.fork(waiter.withLock(name, Effect.void))
        const sid = yield* queued(raw, name)
        yield* Fiber.interrupt(waiting)
        expect(yield* left(raw, name, sid)).toBeNull()
      }))

    it.scopedLive("a closed client's waiter leaves the queue", () =>
      Effect.gen(function*() {
        const name = uniqueName("close")
        const { raw, waiter } = yield* contended(name)
        yield* Effect.fork(waiter.withLock(name, Effect.void))
        const sid = yield* queued(raw, name)
        yield* waiter.close
        expect(yield* left(raw, name, sid)).toBeNull()
      }))

    // With routeBySlot a freed lease is reserved for the head of the queue (one node without it grants
    // it to the head at once, and withdrawing never releases a lease already granted).
    if (mode.routeBySlot) it.scopedLive("a reserved waiter that withdraws passes the reservation on (SPI)", () =>
      Effect.gen(function*() {
        const raw = yield* rawClient(mode.cluster)
        const b = yield* RedisBackend.make(mode.options)
        const name = uniqueName("reserved")
        const ttl = Duration.seconds(5)
        const [holder, first, second] = yield* Effect.forEach([1, 2, 3], () => b.openSession(ttl))
        const token = yield* b.acquire(holder!.sessionId, name)
        if (token._tag !== "Granted") return expect.fail(`expected Granted, got ${token._tag}`)
        expect((yield* b.acquire(first!.sessionId, name))._tag).toBe("HeldBy")
        yield* Effect.sleep("3 millis")
        expect((yield* b.acquire(second!.sessionId, name))._tag).toBe("HeldBy")
        // The holder's session ends: the next acquire (a takeover) reserves the lease for the head, `first`.
        yield* b.closeSession(holder!.sessionId)
        expect((yield* b.acquire(second!.sessionId, name))._tag).toBe("HeldBy")
        expect(yield* Effect.promise(() => raw.hget(k.lease(name), "reserved"))).toBe(first!.sessionId)
        yield* b.withdraw(first!.sessionId, name)
        expect(yield* scoreOf(raw, name, first!.sessionId)).toBeNull()
        // The reservation went on to `second`.
        const reply = yield* b.acquire(second!.sessionId, name)
        expect(reply._tag).toBe("Granted")
      }))
  })
}

describe("Redis waiter queue: 50,000 abandoned waiters (private server, SLOWLOG)", () => {
  it.scopedLive("a release examines at most queueScanBatch entries; its script time stays bounded", () =>
    Effect.gen(function*() {
      // Every command is logged with its duration (µs) on this server only.
      const server = yield* privateServer(["--slowlog-log-slower-than", "0", "--slowlog-max-len", "128"])
      const raw = yield* rawClient(false, server.port)
      const b = yield* RedisBackend.make({ url: `redis://127.0.0.1:${server.port}`, lockDelay: 0 }) // a fresh private server: no lock-delay needed
      const name = uniqueName("abandoned")
      const queue = k.leaseQueue(name)
      const ttl = Duration.seconds(30)
      const holder = yield* b.openSession(ttl)
      const token = yield* b.acquire(holder.sessionId, name)
      if (token._tag !== "Granted") return expect.fail(`expected Granted, got ${token._tag}`)
      // 50,000 waiters whose sessions are gone (no session key), ahead of everyone, in 50 ZADDs.
      const abandoned = 50_000
      for (let chunk = 0; chunk < abandoned / 1000; chunk++) {
        const args: Array<string | number> = []
        for (let i = 0; i < 1000; i++) args.push(chunk * 1000 + i + 1, randomBytes(16).toString("hex"))
        yield* Effect.promise(() => raw.zadd(queue, ...args))
      }
      expect(yield* Effect.promise(() => raw.zcard(queue))).toBe(abandoned)
      // As their refused acquires would have: the lease hash says its queue may hold waiters.
      yield* Effect.promise(() => raw.hset(k.lease(name), "queued", "1"))
      yield* Effect.promise(() => raw.slowlog("RESET"))
      yield* b.release(holder.sessionId, name, token.token)
      const log = (yield* Effect.promise(() => raw.slowlog("GET", 128))) as Array<[number, number, number, Array<string>]>
      // The release, by SHA or as a function of the library (the default).
      const releaseCalls = new Set([releaseScript.script.sha, library.functionOf(releaseScript.script)])
      const releases = log.filter(([, , , argv]) =>
        ["EVALSHA", "FCALL"].includes(argv[0]?.toUpperCase() ?? "") && releaseCalls.has(argv[1])
      )
      expect(releases).toHaveLength(1)
      const micros = releases[0]![2]
      console.log(`release behind ${abandoned} abandoned waiters: ${micros} µs (batch ${queueScanBatch})`)
      // Exactly one batch was examined (all dead) and dropped; the walk resumes at the next call.
      expect(yield* Effect.promise(() => raw.zcard(queue))).toBe(abandoned - queueScanBatch)
      // The bound: walking the whole queue is at least 50,000 EXISTS plus 50,000 ZREM (>= 50 ms at
      // ~1 µs per command from Lua; 125.6 ms measured before the batch); one batch is 32 EXISTS and
      // one ZREM (~100 µs). 10 ms is far above one batch (a loaded machine may pause the server) and
      // far below any walk of the queue.
      expect(micros).toBeLessThan(10_000)
      // The next acquire of the free lease resumes the walk (one more batch) and, finding no live
      // waiter within it, grants the lease to the asker.
      const next = yield* b.openSession(ttl)
      expect((yield* b.acquire(next.sessionId, name))._tag).toBe("Granted")
      expect(yield* Effect.promise(() => raw.zcard(queue))).toBe(abandoned - 2 * queueScanBatch)
    }))
})
