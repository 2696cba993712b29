import { describe, expect, it } from "@effect/vitest"
import { Duration, Effect, Option } from "effect"
import { MemoryBackend } from "simba"
import { advance, eventsOf, makeClient } from "./helpers.js"

describe("timing", () => {
  it.scoped("a backend granting less than leaseDuration: renewal every third of the granted validity, one SessionLeaseShortened", () =>
    Effect.gen(function*() {
      // The client asks for 15 s; the backend grants 3 s (like a ZooKeeper maxSessionTimeout).
      const backend = yield* MemoryBackend.make({ maxTtl: Duration.seconds(3) })
      const a = yield* makeClient(backend, { leaseDuration: "15 seconds" })
      const election = yield* a.client.election("short")
      yield* advance("200 millis")
      const term = Option.getOrThrow(yield* election.term)
      const renewalsBefore = (yield* a.calls).filter((c) => c.operation === "keepAlive").length
      yield* advance("30 seconds")
      const renewals = (yield* a.calls).filter((c) => c.operation === "keepAlive").length - renewalsBefore
      // Granted validity: 3000 × 0.99 − 50 = 2920 ms, so a renewal every ~973 ms: about 30 in 30 s.
      expect(renewals).toBeGreaterThanOrEqual(29)
      expect(renewals).toBeLessThanOrEqual(32)
      const shortened = yield* eventsOf(a.events, "SessionLeaseShortened")
      expect(shortened).toHaveLength(1)
      expect(shortened[0]!.event.granted).toBe(3000)
      expect(shortened[0]!.event.renewEvery).toBeCloseTo(2920 / 3, 0)
      // ...and the term lived through it all.
      expect(yield* term.isValid).toBe(true)
      expect(yield* eventsOf(a.events, "Revoked")).toEqual([])
    }))

  it.scoped("renewal every renewInterval when the backend grants the full lease", () =>
    Effect.gen(function*() {
      const backend = yield* MemoryBackend.make()
      const a = yield* makeClient(backend, { leaseDuration: "3 seconds" })
      yield* advance("200 millis")
      const before = (yield* a.calls).filter((c) => c.operation === "keepAlive").length
      yield* advance("10 seconds")
      const renewals = (yield* a.calls).filter((c) => c.operation === "keepAlive").length - before
      expect(renewals).toBe(10)
      expect(yield* eventsOf(a.events, "SessionLeaseShortened")).toEqual([])
    }))

  it.scoped("an expired session is never revived: terms end with SESSION_EXPIRED and a new session competes", () =>
    Effect.gen(function*() {
      const backend = yield* MemoryBackend.make()
      const a = yield* makeClient(backend)
      const election = yield* a.client.election("expiry")
      yield* advance("200 millis")
      const first = Option.getOrThrow(yield* election.term)
      const firstSession = (yield* a.client.snapshot).session.id
      // The backend forgets the session (as a restarted Redis without persistence would).
      yield* backend.closeSession(firstSession!)
      yield* advance("1500 millis")
      expect(yield* first.revoked).toBe("SESSION_EXPIRED")
      const ended = yield* eventsOf(a.events, "SessionEnded")
      expect(ended.map((r) => r.event.reason)).toEqual(["SESSION_EXPIRED"])
      const snapshot = yield* a.client.snapshot
      expect(snapshot.session.id).not.toBe(firstSession)
      expect(snapshot.session.status).toBe("LIVE")
      const second = Option.getOrThrow(yield* election.term)
      expect(second.sessionId).toBe(snapshot.session.id)
      expect(second.token).toBeGreaterThan(first.token)
      expect(yield* first.isValid).toBe(false)
    }))
})
