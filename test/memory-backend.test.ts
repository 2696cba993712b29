import { addEqualityTesters, describe, expect, it } from "@effect/vitest"
import * as Arr from "effect/Array"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Exit from "effect/Exit"
import * as Fiber from "effect/Fiber"
import * as Random from "effect/Random"
import * as TestClock from "effect/TestClock"
import { type Hint, LeaseBackend } from "../src/LeaseBackend.js"
import * as MemoryBackend from "../src/layers/Memory.js"
import { FencingSpec } from "./tck/FencingSpec.js"
import { LeaseBackendSpec } from "./tck/LeaseBackendSpec.js"
import * as TckHarness from "./tck/TckHarness.js"

// Compare `Duration`s (and other Effect data) by value in `toEqual`.
addEqualityTesters()

LeaseBackendSpec("memory", MemoryBackend.layer(), { virtualTime: true, ttl: "10 seconds", hints: true, holds: true })
FencingSpec("memory", MemoryBackend.layer(), { virtualTime: true, ttl: "10 seconds" })
// A backend that grants less than asked, as ZooKeeper caps session timeouts.
LeaseBackendSpec("memory, maxTtl 4 s", MemoryBackend.layer({ maxTtl: "4 seconds" }), {
  virtualTime: true,
  ttl: "10 seconds",
  granted: "4 seconds",
  hints: true,
  holds: true,
  // The clients ask for 6 s and get 4 s: they renew every third of that (SessionLeaseShortened).
  client: { leaseDuration: "6 seconds" },
  contendFor: "30 seconds"
})

describe("MemoryBackend", () => {
  it.effect("clients sharing one backend value share its state", () =>
    Effect.gen(function*() {
      const backend = yield* MemoryBackend.make()
      const other = yield* MemoryBackend.make()
      const a = yield* backend.openSession(Duration.seconds(5))
      const b = yield* backend.openSession(Duration.seconds(5))
      expect(backend.backend).toBe("memory")
      const granted = yield* Effect.flatMap(LeaseBackend, (service) => service.acquire(a.sessionId, "shared")).pipe(
        Effect.provideService(LeaseBackend, backend)
      )
      expect(granted).toEqual({ _tag: "Granted", token: 1n })
      expect((yield* backend.acquire(b.sessionId, "shared"))._tag).toBe("HeldBy")
      // An independent store knows neither the session nor the lease.
      expect((yield* other.acquire(a.sessionId, "shared"))._tag).toBe("Expired")
    }))

  it.effect("maxTtl cuts the granted ttl and expiry follows the grant", () =>
    Effect.gen(function*() {
      const backend = yield* MemoryBackend.make({ maxTtl: "3 seconds" })
      const opened = yield* backend.openSession(Duration.seconds(10))
      expect(Duration.toMillis(opened.remaining)).toBe(3000)
      const short = yield* backend.openSession(Duration.seconds(1))
      expect(Duration.toMillis(short.remaining)).toBe(1000)
      yield* TestClock.adjust("2 seconds")
      const live = yield* backend.keepAlive(opened.sessionId, Duration.seconds(10))
      expect(live._tag === "Live" && Duration.toMillis(live.remaining)).toBe(3000)
      expect((yield* backend.keepAlive(short.sessionId, Duration.seconds(1)))._tag).toBe("Expired")
      yield* TestClock.adjust("3 seconds")
      expect((yield* backend.keepAlive(opened.sessionId, Duration.seconds(10)))._tag).toBe("Expired")
    }))

  it.effect("rejects a ttl that is not finite and positive with BackendError", () =>
    Effect.gen(function*() {
      const backend = yield* MemoryBackend.make()
      for (const ttl of [Duration.zero, Duration.infinity]) {
        const exit = yield* Effect.exit(backend.openSession(ttl))
        expect(exit).toMatchObject(Exit.fail({ _tag: "BackendError", backend: "memory", operation: "openSession" }))
      }
      const opened = yield* backend.openSession(Duration.seconds(1))
      const error = yield* Effect.flip(backend.keepAlive(opened.sessionId, Duration.zero))
      expect(error._tag).toBe("BackendError")
      expect(error.operation).toBe("keepAlive")
    }))

  it.effect("never repeats a session id, even when Random does", () =>
    Effect.gen(function*() {
      const backend = yield* MemoryBackend.make()
      // Two ids' worth of values, repeated forever.
      const repeating = Random.fixed([1, 2, 3, 4, 5, 6, 7, 8])
      const open = Effect.withRandom(backend.openSession(Duration.seconds(5)), repeating)
      const first = yield* open
      const second = yield* open
      expect(first.sessionId).toBe("00000001000000020000000300000004")
      expect(second.sessionId).toBe("00000005000000060000000700000008")
      // Both possible ids are taken, even once their sessions are closed: refuse rather than repeat.
      yield* backend.closeSession(first.sessionId)
      const error = yield* Effect.flip(open)
      expect(error._tag).toBe("BackendError")
      expect(error.operation).toBe("openSession")
    }))

  it.effect("keepAlive lists leases by name and group members in order", () =>
    Effect.gen(function*() {
      const backend = yield* MemoryBackend.make()
      const ids: Array<string> = []
      for (let i = 0; i < 4; i++) ids.push((yield* backend.openSession(Duration.seconds(5))).sessionId)
      const [me] = ids as [string]
      for (const name of ["c", "a", "b"]) yield* backend.acquire(me, name)
      for (const group of ["g2", "g1"]) {
        for (const id of [...ids].reverse()) yield* backend.join(id, group)
      }
      const live = yield* backend.keepAlive(me, Duration.seconds(5))
      const sorted = [...ids].sort()
      expect(live).toEqual({
        _tag: "Live",
        remaining: Duration.seconds(5),
        // Three grants, three changes of the set.
        version: "3",
        leases: [{ name: "a", token: 1n }, { name: "b", token: 1n }, { name: "c", token: 1n }],
        groups: [{ group: "g1", members: sorted }, { group: "g2", members: sorted }]
      })
      expect(yield* backend.members("g1")).toEqual(sorted)
    }))

  it.effect("HeldBy reports the holder's time left, renewed or not", () =>
    Effect.gen(function*() {
      const backend = yield* MemoryBackend.make()
      const holder = (yield* backend.openSession(Duration.seconds(10))).sessionId
      const other = (yield* backend.openSession(Duration.seconds(30))).sessionId
      yield* backend.acquire(holder, "name")
      yield* TestClock.adjust("4 seconds")
      expect(yield* backend.acquire(other, "name")).toEqual({
        _tag: "HeldBy",
        token: 1n,
        remaining: Duration.seconds(6)
      })
      yield* backend.keepAlive(holder, Duration.seconds(10))
      yield* TestClock.adjust("1 second")
      expect(yield* backend.acquire(other, "name")).toEqual({
        _tag: "HeldBy",
        token: 1n,
        remaining: Duration.seconds(9)
      })
    }))

  it.effect("works at fractional-millisecond TestClock instants", () =>
    Effect.gen(function*() {
      const backend = yield* MemoryBackend.make()
      const opened = yield* backend.openSession(Duration.seconds(10))
      // A client renewing every 10 s / 7 wakes at instants like 4285.714284 ms, where TestClock's
      // `currentTimeNanos` would throw (`BigInt` of a non-integer); `currentTimeMillis` does not.
      const renewals = yield* Effect.fork(Effect.forEach(Arr.range(1, 6), () =>
        Effect.zipRight(
          Effect.sleep(Duration.millis(10_000 / 7)),
          backend.keepAlive(opened.sessionId, Duration.seconds(10))
        )))
      yield* TestClock.adjust("9 seconds")
      const replies = yield* Fiber.join(renewals)
      expect(replies.map((reply) => reply._tag)).toEqual(Arr.replicate("Live", 6))
      expect((yield* backend.keepAlive(opened.sessionId, Duration.seconds(10)))._tag).toBe("Live")
    }))

  it.scoped("pushes hints only for changes that happened", () =>
    Effect.gen(function*() {
      const tck = TckHarness.make(MemoryBackend.layer(), { virtualTime: true, ttl: "10 seconds", hints: true })
      const backend = yield* LeaseBackend
      const watch = yield* TckHarness.watchHints(tck)
      const a = (yield* backend.openSession(Duration.seconds(10))).sessionId
      const b = (yield* backend.openSession(Duration.seconds(10))).sessionId
      const token = yield* TckHarness.acquireGranted(a, "x")
      yield* backend.release(b, "x", token) // not the holder
      yield* backend.release(a, "x", token + 1n) // stale token
      yield* backend.join(a, "g")
      yield* backend.join(a, "g") // already a member
      yield* backend.leave(b, "g") // not a member
      yield* backend.acquire(a, "y")
      yield* TestClock.adjust("10 seconds") // expiry is silent
      yield* backend.members("g")
      yield* backend.closeSession(a) // already expired: nothing left to free
      const sentinel = (yield* backend.openSession(Duration.seconds(10))).sessionId
      yield* backend.release(sentinel, "sentinel", yield* TckHarness.acquireGranted(sentinel, "sentinel"))
      yield* watch.await((hint) => hint._tag === "Released" && hint.name === "sentinel")
      const ours = (yield* watch.seen).filter((hint: Hint) =>
        hint._tag === "GroupChanged" || ["x", "y", "sentinel"].includes(hint.name)
      )
      expect(ours).toEqual([
        { _tag: "GroupChanged", group: "g" },
        { _tag: "Released", name: "sentinel" }
      ])
    }).pipe(Effect.provide(MemoryBackend.layer())))
})
