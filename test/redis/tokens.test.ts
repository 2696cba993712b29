/**
 * Redis tokens without persistence: a new token is max(stored + 1, the server's TIME in
 * microseconds), so it rises across a wipe of the store; a freed lease hash expires after
 * `idleExpiry`, a held one never does. After a wipe (boot marker missing) nothing is granted for one
 * lock-delay, paid once for the whole store. Wipes happen on private servers only.
 */
import { describe, expect, it } from "@effect/vitest"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import type { AcquireReply } from "../../src/LeaseBackend.js"
import * as RedisBackend from "../../src/layers/redis/RedisBackend.js"
import type { LeaseBackendService } from "../../src/LeaseBackend.js"
import {
  modes,
  privateCluster,
  privateServer,
  type RawClient,
  rawClient,
  serverTime,
  uniqueName
} from "./RedisServers.js"
import { granted, heldBy } from "../support/replies.js"

const ttl = Duration.seconds(10)
const k = RedisBackend.keys()
const keySlot = RedisBackend.keySlot


/** The server's clock (`TIME`) in microseconds. */
const serverMicros = (client: RawClient) =>
  Effect.promise(() => client.time()).pipe(Effect.map(([s, us]) => BigInt(s) * 1_000_000n + BigInt(us)))

describe("Redis tokens", () => {
  it.scopedLive("a token is at least the server's TIME in microseconds, and rises across a FLUSHALL", () =>
    Effect.gen(function*() {
      const server = yield* privateServer()
      const raw = yield* rawClient(false, server.port)
      // A fresh store: no lock-delay needed for this test (the lock-delay cases are below).
      const b = yield* RedisBackend.make({ port: server.port, lockDelay: 0 })
      const name = uniqueName("time-token")
      const { sessionId } = yield* b.openSession(ttl)
      const before = yield* serverMicros(raw)
      const first = granted(yield* b.acquire(sessionId, name))
      const after = yield* serverMicros(raw)
      expect(first).toBeGreaterThanOrEqual(before)
      expect(first).toBeLessThanOrEqual(after)
      // Stored as a decimal integer (no exponent), and released with that exact string.
      expect(yield* Effect.promise(() => raw.hget(k.lease(name), "token"))).toBe(first.toString())
      yield* b.release(sessionId, name, first)
      expect(yield* Effect.promise(() => raw.hget(k.lease(name), "session"))).toBeNull()
      // Re-acquired within the same microsecond or not: strictly above.
      const again = granted(yield* b.acquire(sessionId, name))
      expect(again).toBeGreaterThan(first)

      yield* Effect.promise(() => raw.flushall())
      const fresh = yield* b.openSession(ttl)
      expect(granted(yield* b.acquire(fresh.sessionId, name))).toBeGreaterThan(again)
    }))

  for (const mode of modes) {
    describe(mode.label, () => {
      it.scopedLive("a freed lease hash expires after idleExpiry; a held one does not expire", () =>
        Effect.gen(function*() {
          const b = yield* RedisBackend.make({ ...mode.options, idleExpiry: "400 millis" })
          const raw = yield* rawClient(mode.cluster)
          const name = uniqueName("idle")
          const { sessionId } = yield* b.openSession(ttl)
          const first = granted(yield* b.acquire(sessionId, name))
          expect(yield* Effect.promise(() => raw.pttl(k.lease(name)))).toBe(-1)
          yield* b.release(sessionId, name, first)
          const left = yield* Effect.promise(() => raw.pttl(k.lease(name)))
          expect(left).toBeGreaterThan(0)
          expect(left).toBeLessThanOrEqual(400)
          // Taken again before it expired: persistent while held.
          const second = granted(yield* b.acquire(sessionId, name))
          expect(second).toBeGreaterThan(first)
          expect(yield* Effect.promise(() => raw.pttl(k.lease(name)))).toBe(-1)
          yield* Effect.sleep("600 millis")
          expect(yield* Effect.promise(() => raw.exists(k.lease(name)))).toBe(1)
          // Closing the session frees it too: gone once idle.
          yield* b.closeSession(sessionId)
          yield* Effect.sleep("600 millis")
          expect(yield* Effect.promise(() => raw.exists(k.lease(name)))).toBe(0)
          // A name whose hash expired still gets a larger token.
          const next = yield* b.openSession(ttl)
          expect(granted(yield* b.acquire(next.sessionId, name))).toBeGreaterThan(second)
          yield* b.closeSession(next.sessionId)
        }))
    })
  }
})

/** The lock-delay of these tests: their lease duration (what the option's documentation asks for). */
const delay = 1500


/** Acquires on a new session during a lock-delay: HeldBy without a token, retry after `remaining`. */
const delayed = (b: LeaseBackendService, name: string) =>
  Effect.gen(function*() {
    const { sessionId } = yield* b.openSession(ttl)
    const reply = heldBy(yield* b.acquire(sessionId, name))
    expect(reply.token).toBeUndefined()
    const remaining = Duration.toMillis(reply.remaining!)
    expect(remaining).toBeGreaterThan(0)
    expect(remaining).toBeLessThanOrEqual(delay)
    return { sessionId, remaining }
  })

/** Sleeps past the rest of the delay, then the same session's acquire is granted. */
const grantedAfter = (b: LeaseBackendService, name: string, waiting: { sessionId: string; remaining: number }) =>
  Effect.zipRight(Effect.sleep(Duration.millis(waiting.remaining + 20)), b.acquire(waiting.sessionId, name)).pipe(
    Effect.map(granted)
  )

describe("Redis lock-delay after lost state", () => {
  it.scopedLive("single node: nothing granted for one lockDelay on a fresh store and after a FLUSHALL, granted after, larger token", () =>
    Effect.gen(function*() {
      const server = yield* privateServer()
      const raw = yield* rawClient(false, server.port)
      const b = yield* RedisBackend.make({ port: server.port, lockDelay: `${delay} millis` })
      const name = uniqueName("delay")
      // A fresh store: the backend created the marker at start, with a full delay.
      const resume = Number(yield* Effect.promise(() => raw.get(k.boot)))
      expect(resume).toBeGreaterThan((yield* serverTime(raw)) + delay - 1000)
      const first = yield* delayed(b, name)
      // Asked again, the same answer, with less time left.
      yield* Effect.sleep("200 millis")
      const again = heldBy(yield* b.acquire(first.sessionId, name))
      expect(Duration.toMillis(again.remaining!)).toBeLessThan(first.remaining)
      const before = yield* grantedAfter(b, name, first)
      expect(yield* serverTime(raw)).toBeGreaterThanOrEqual(resume)

      // The store loses everything: the holder's session is gone, and nobody gets the lease for a delay.
      yield* Effect.promise(() => raw.flushall())
      expect((yield* b.keepAlive(first.sessionId, ttl))._tag).toBe("Expired")
      const waiting = yield* delayed(b, name)
      expect(waiting.remaining).toBeGreaterThan(delay - 500)
      const wipedAt = Number(yield* Effect.promise(() => raw.get(k.boot))) - delay
      const after = yield* grantedAfter(b, name, waiting)
      expect(yield* serverTime(raw)).toBeGreaterThanOrEqual(wipedAt + delay)
      expect(after).toBeGreaterThan(before)
    }))

  it.scopedLive("routeBySlot (cluster scripts) on a private node: a marker per slot, a fresh or wiped store pays one delay, not one per slot", () =>
    Effect.gen(function*() {
      const server = yield* privateServer()
      const raw = yield* rawClient(false, server.port)
      const b = yield* RedisBackend.make({ port: server.port, routeBySlot: true, lockDelay: `${delay} millis` })
      const markers = Effect.promise(() => raw.keys("simba:boot:*"))
      expect((yield* markers).length).toBe(16384)
      const a = uniqueName("delay-a")
      let other = uniqueName("delay-b")
      while (keySlot(k.lease(other)) === keySlot(k.lease(a))) other = uniqueName("delay-b")
      // Made in one pass at start, every slot's marker resumes at the same server time (that pass can
      // outlast the delay on a loaded machine, so the first acquires may be granted at once).
      const resumes = new Set(yield* Effect.promise(() => raw.mget(k.bootIn(RedisBackend.slotTag(keySlot(k.lease(a)))), k.bootIn(RedisBackend.slotTag(keySlot(k.lease(other)))), k.bootIn("0"))))
      expect(resumes.size).toBe(1)
      const resume = Number([...resumes][0])
      yield* Effect.sleep(Duration.millis(Math.max(resume - (yield* serverTime(raw)), 0) + 20))
      const { sessionId: first } = yield* b.openSession(ttl)
      const tokenA = granted(yield* b.acquire(first, a))
      const tokenB = granted(yield* b.acquire(first, other))

      yield* Effect.promise(() => raw.flushall())
      const afterWipe = yield* delayed(b, a)
      expect(afterWipe.remaining).toBeGreaterThan(delay - 500)
      // The acquire that found its slot's marker missing created every slot's marker at once.
      expect((yield* markers).length).toBe(16384)
      expect(yield* grantedAfter(b, a, afterWipe)).toBeGreaterThan(tokenA)
      const { sessionId } = yield* b.openSession(ttl)
      expect(granted(yield* b.acquire(sessionId, other))).toBeGreaterThan(tokenB)
    }))

  it.scopedLive("a private 2-node cluster: one node wiped alone delays its slots only, and the others keep granting", () =>
    Effect.gen(function*() {
      const servers = yield* privateCluster(2)
      const nodes = servers.map((s) => ({ host: "127.0.0.1", port: s.port }))
      const b = yield* RedisBackend.make({ cluster: { nodes }, lockDelay: `${delay} millis` })
      // One name in the slots of each node (node 0 serves slots 0-8191, node 1 the rest).
      let low = uniqueName("low")
      while (keySlot(k.lease(low)) >= 8192) low = uniqueName("low")
      let high = uniqueName("high")
      while (keySlot(k.lease(high)) < 8192) high = uniqueName("high")
      // The fresh cluster's delay started when the backend created its markers (all 16384 of them, a
      // pass that can outlast the delay on a loaded machine): wait until both names are granted.
      const { sessionId: first } = yield* b.openSession(ttl)
      const eventually = (name: string) =>
        b.acquire(first, name).pipe(
          Effect.flatMap((reply) =>
            Effect.as(reply._tag === "HeldBy" ? Effect.sleep(reply.remaining!) : Effect.void, reply as AcquireReply)
          ),
          Effect.repeat({ until: (reply) => reply._tag === "Granted", times: 5 }),
          Effect.map(granted)
        )
      const tokenLow = yield* eventually(low)
      const tokenHigh = yield* eventually(high)
      yield* b.release(first, low, tokenLow)
      yield* b.release(first, high, tokenHigh)

      const wiped = yield* rawClient(false, servers[1]!.port)
      expect((yield* Effect.promise(() => wiped.keys("simba:boot:*"))).length).toBe(8192)
      yield* Effect.promise(() => wiped.flushall())
      // The wiped node's slot: delayed; the other node's: granted at once, with a larger token.
      const { sessionId } = yield* b.openSession(ttl)
      expect(granted(yield* b.acquire(sessionId, low))).toBeGreaterThan(tokenLow)
      const waiting = yield* delayed(b, high)
      expect(waiting.remaining).toBeGreaterThan(delay - 500)
      expect(yield* grantedAfter(b, high, waiting)).toBeGreaterThan(tokenHigh)
    }))
})
