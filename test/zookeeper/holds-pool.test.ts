/**
 * Holds on ZooKeeper at the SPI, on the standalone server at 127.0.0.1:2181 (the TCK's hold cases run
 * them through the client): the queue's children and what each acquire answers, the grants pushed as
 * `Granted` hints when a pool changes (no polling), withdrawal, tokens rising across holds and the
 * plain lock of the name, and holds ending with their session.
 */
import { describe, expect, it } from "@effect/vitest"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Queue from "effect/Queue"
import type * as Scope from "effect/Scope"
import * as Stream from "effect/Stream"
import { randomBytes } from "node:crypto"
import { type AcquireReply, type Hint, LeaseBackend, type LeaseBackendService } from "../../src/LeaseBackend.js"
import * as LeaseName from "../../src/LeaseName.js"
import * as ZookeeperBackend from "../../src/layers/zookeeper/ZookeeperBackend.js"
import { standalone } from "./ZookeeperServers.js"

const unique = (label: string) => `zk.${randomBytes(8).toString("hex")}.${label}`
let ids = 0
const holdId = () => `t${randomBytes(4).toString("hex")}.${++ids}`

const permits = (pool: string, weight: number, limit: number) =>
  LeaseName.holdName({ pool, mode: "permits", weight, limit, id: holdId() })
const read = (pool: string) => LeaseName.holdName({ pool, mode: "read", weight: 1, limit: 0, id: holdId() })

const backendOf: Effect.Effect<LeaseBackendService, unknown, Scope.Scope> = Effect.flatMap(
  Layer.build(ZookeeperBackend.layer(standalone)),
  (context) => Effect.succeed(context.unsafeMap.get(LeaseBackend.key) as LeaseBackendService)
)

const tokenOf = (reply: AcquireReply): bigint => {
  if (reply._tag !== "Granted") return expect.fail(`expected Granted, got ${JSON.stringify(reply)}`)
  return reply.token
}

/** The hints of `b`, from now on, in a queue. */
const hintsOf = (b: LeaseBackendService) =>
  Effect.gen(function*() {
    const queue = yield* Queue.unbounded<Hint>()
    yield* Effect.forkScoped(Stream.runForEach(b.hints, (hint) => Queue.offer(queue, hint)))
    yield* Effect.sleep(Duration.millis(50))
    return queue
  })

/** The next `Granted` hint for `name`, within 5 s. */
const grantOf = (queue: Queue.Queue<Hint>, name: string) =>
  Effect.gen(function*() {
    while (true) {
      const hint = yield* Queue.take(queue)
      if (hint._tag === "Granted" && hint.name === name) return hint
    }
  }).pipe(Effect.timeoutFail({ duration: Duration.seconds(5), onTimeout: () => new Error(`no Granted hint for ${name}`) }))

const ttl = Duration.seconds(10)

describe("ZookeeperBackend: holds", () => {
  it.scopedLive("semaphore: FIFO, a waiter granted by a pushed hint, tokens above every earlier grant", () =>
    Effect.gen(function*() {
      const b = yield* backendOf
      const hints = yield* hintsOf(b)
      expect(b.holds).toBe(true)
      const pool = unique("sem")
      const [s1, s2, s3] = yield* Effect.all([b.openSession(ttl), b.openSession(ttl), b.openSession(ttl)])
      const a = permits(pool, 1, 3)
      const big = permits(pool, 3, 3)
      const small = permits(pool, 1, 3)
      const first = tokenOf(yield* b.acquire(s1.sessionId, a))
      expect((yield* b.acquire(s2.sessionId, big))._tag).toBe("HeldBy")
      // Two permits are free, but the 3-permit request came first.
      expect((yield* b.acquire(s3.sessionId, small))._tag).toBe("HeldBy")
      expect((yield* b.acquire(s3.sessionId, small))._tag).toBe("HeldBy")
      // Asked again, a granted hold answers its token.
      expect(tokenOf(yield* b.acquire(s1.sessionId, a))).toBe(first)
      yield* b.release(s1.sessionId, a, first)
      const bigGrant = yield* grantOf(hints, big)
      expect(bigGrant.to).toBe(s2.sessionId)
      expect(bigGrant.token).toBeGreaterThan(first)
      expect(tokenOf(yield* b.acquire(s2.sessionId, big))).toBe(bigGrant.token)
      expect((yield* b.acquire(s3.sessionId, small))._tag).toBe("HeldBy")
      yield* b.release(s2.sessionId, big, bigGrant.token)
      const smallGrant = yield* grantOf(hints, small)
      expect(smallGrant.token).toBeGreaterThan(bigGrant.token)
      // The renewal lists the hold as a lease of the session.
      const renewed = yield* b.keepAlive(s3.sessionId, ttl)
      expect(renewed._tag === "Live" ? renewed.leases?.map((l) => l.name) : renewed._tag).toEqual([small])
    }))

  it.scopedLive("semaphore: never more than limit permits among many requests", () =>
    Effect.gen(function*() {
      const b = yield* backendOf
      const pool = unique("limit")
      const sessions = yield* Effect.all(Array.from({ length: 5 }, () => b.openSession(ttl)))
      const names = sessions.map(() => permits(pool, 1, 2))
      const replies = yield* Effect.all(sessions.map((s, i) => b.acquire(s.sessionId, names[i]!)), { concurrency: "unbounded" })
      expect(replies.filter((reply) => reply._tag === "Granted")).toHaveLength(2)
      expect(replies.filter((reply) => reply._tag === "HeldBy")).toHaveLength(3)
    }))

  it.scopedLive("read-write: readers together; a plain writer queues behind them; a later reader waits behind the writer", () =>
    Effect.gen(function*() {
      const b = yield* backendOf
      const hints = yield* hintsOf(b)
      const pool = unique("rw")
      const [s1, s2, s3, s4] = yield* Effect.all(Array.from({ length: 4 }, () => b.openSession(ttl)))
      const r1 = read(pool)
      const r2 = read(pool)
      const r4 = read(pool)
      const t1 = tokenOf(yield* b.acquire(s1!.sessionId, r1))
      const t2 = tokenOf(yield* b.acquire(s2!.sessionId, r2))
      expect(t2).toBeGreaterThan(t1)
      expect((yield* b.acquire(s3!.sessionId, pool))._tag).toBe("HeldBy")
      expect((yield* b.acquire(s4!.sessionId, r4))._tag).toBe("HeldBy")
      yield* b.release(s1!.sessionId, r1, t1)
      expect((yield* b.acquire(s3!.sessionId, pool))._tag).toBe("HeldBy")
      yield* b.release(s2!.sessionId, r2, t2)
      const written = yield* grantOf(hints, pool)
      expect(written.to).toBe(s3!.sessionId)
      expect(written.token).toBeGreaterThan(t2)
      expect((yield* b.acquire(s4!.sessionId, r4))._tag).toBe("HeldBy")
      yield* b.release(s3!.sessionId, pool, written.token)
      const readAfter = yield* grantOf(hints, r4)
      expect(readAfter.token).toBeGreaterThan(written.token)
    }))

  it.scopedLive("conflicts: another limit, a lock on a semaphore, a semaphore on a held lock; a withdrawn waiter lets the next one in", () =>
    Effect.gen(function*() {
      const b = yield* backendOf
      const hints = yield* hintsOf(b)
      const pool = unique("kind")
      const lock = unique("lock")
      const [s1, s2, s3] = yield* Effect.all([b.openSession(ttl), b.openSession(ttl), b.openSession(ttl)])
      const a = permits(pool, 2, 2)
      const token = tokenOf(yield* b.acquire(s1.sessionId, a))
      expect(yield* b.acquire(s2.sessionId, permits(pool, 1, 3))).toMatchObject({
        _tag: "Conflict",
        held: "semaphore of 2 permits",
        asked: "semaphore of 3 permits"
      })
      expect(yield* b.acquire(s2.sessionId, pool)).toMatchObject({ _tag: "Conflict", held: "semaphore of 2 permits", asked: "lock" })
      expect(yield* b.acquire(s2.sessionId, read(pool))).toMatchObject({ _tag: "Conflict", held: "semaphore of 2 permits", asked: "read-write lock" })
      tokenOf(yield* b.acquire(s1.sessionId, lock))
      expect(yield* b.acquire(s2.sessionId, permits(lock, 1, 2))).toMatchObject({ _tag: "Conflict", held: "lock", asked: "semaphore of 2 permits" })
      // s2 waits for two permits, s3 for one behind it; s2 withdraws, and s3 is next.
      const w2 = permits(pool, 2, 2)
      const w3 = permits(pool, 1, 2)
      expect((yield* b.acquire(s2.sessionId, w2))._tag).toBe("HeldBy")
      expect((yield* b.acquire(s3.sessionId, w3))._tag).toBe("HeldBy")
      yield* b.withdraw(s2.sessionId, w2)
      yield* b.release(s1.sessionId, a, token)
      const next = yield* grantOf(hints, w3)
      expect(next.to).toBe(s3.sessionId)
      // A plain lock on a pool's name is a plain lock again once the pool is empty.
      yield* b.release(s3.sessionId, w3, next.token)
      expect(tokenOf(yield* b.acquire(s2.sessionId, pool))).toBeGreaterThan(next.token)
    }))

  it.scopedLive("a hold ends with its session: a closed holder's permits go to the waiter", () =>
    Effect.gen(function*() {
      const b = yield* backendOf
      const hints = yield* hintsOf(b)
      const pool = unique("closed")
      const [s1, s2] = yield* Effect.all([b.openSession(ttl), b.openSession(ttl)])
      const a = permits(pool, 1, 1)
      const waiting = permits(pool, 1, 1)
      const token = tokenOf(yield* b.acquire(s1.sessionId, a))
      expect((yield* b.acquire(s2.sessionId, waiting))._tag).toBe("HeldBy")
      yield* b.closeSession(s1.sessionId)
      const grant = yield* grantOf(hints, waiting)
      expect(grant.token).toBeGreaterThan(token)
    }))
})
