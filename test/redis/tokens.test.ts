/**
 * Redis tokens without persistence: a new token is max(stored + 1, the server's TIME in
 * microseconds), so it rises across a wipe of the store; a freed lease hash expires after
 * `idleExpiry`, a held one never does. Wipes happen on private servers only.
 */
import { describe, expect, it } from "@effect/vitest"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import type { AcquireReply } from "../../src/LeaseBackend.js"
import * as RedisBackend from "../../src/layers/redis/RedisBackend.js"
import { modes, privateServer, type RawClient, rawClient, uniqueName } from "./RedisServers.js"

const ttl = Duration.seconds(10)
const k = RedisBackend.keys()

const granted = (reply: AcquireReply): bigint => {
  if (reply._tag !== "Granted") expect.fail(`expected Granted, got ${reply._tag}`)
  return reply.token
}

/** The server's clock (`TIME`) in microseconds. */
const serverMicros = (client: RawClient) =>
  Effect.promise(() => client.time()).pipe(Effect.map(([s, us]) => BigInt(s) * 1_000_000n + BigInt(us)))

describe("Redis tokens", () => {
  it.scopedLive("a token is at least the server's TIME in microseconds, and rises across a FLUSHALL", () =>
    Effect.gen(function*() {
      const server = yield* privateServer()
      const raw = yield* rawClient(false, server.port)
      const b = yield* RedisBackend.make({ port: server.port })
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
