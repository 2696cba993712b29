/**
 * Backend calls time out after one renew interval (their deadlines in the client's timer heap): a hung
 * call is answered `Failed` exactly at its deadline, several hung calls each at their own, and a reply
 * that comes after its call timed out is dropped (the engine hears about each call once).
 */
import { describe, expect, it } from "@effect/vitest"
import { Clock, Effect, Exit, Option, Ref, Scope } from "effect"
import { LeaseBackend, MemoryBackend, Simba } from "simba"
import { advance, makeClient, type Recorded } from "./helpers.js"

// leaseDuration 3 s: renewInterval (and every call's timeout) 1 s.
const RENEW = 1000

const failures = (events: ReadonlyArray<Recorded>) =>
  events.flatMap(({ at, event }) =>
    event._tag === "BackendFailed" ? [{ at, operation: event.operation, error: event.error }] : []
  )

/** A client on a fresh in-memory backend, its session open. */
const openedClient = Effect.gen(function*() {
  const c = yield* makeClient(yield* MemoryBackend.make())
  yield* advance("100 millis")
  return c
})

describe("backend call timeouts", () => {
  it.scoped("a hung renewal is answered as failed exactly one renew interval after it was sent", () =>
    Effect.gen(function*() {
      const c = yield* openedClient
      const start = yield* Clock.currentTimeMillis
      yield* c.faults.pause({ only: "keepAlive" })
      yield* advance("2500 millis", "50 millis")
      const failed = failures(yield* c.events.get)
      expect(failed.length).toBeGreaterThanOrEqual(1)
      // The renewal goes out at 1000 ms (virtual), hangs, and fails at 2000 ms.
      const renewalSent = (yield* c.calls).find((call) => call.operation === "keepAlive" && call.at >= start)!
      expect(failed[0]!.operation).toBe("keepAlive")
      expect(failed[0]!.error).toContain(`timed out after ${RENEW} ms`)
      expect(failed[0]!.at - renewalSent.at).toBe(RENEW)
      yield* c.faults.resume
    }))

  it.scoped("hung calls sent at different times each fail at their own deadline", () =>
    Effect.gen(function*() {
      const c = yield* openedClient
      yield* c.faults.pause({ only: "acquire" })
      const t0 = yield* Clock.currentTimeMillis
      yield* c.client.election("first")
      yield* advance("300 millis", "50 millis")
      yield* c.client.election("second")
      yield* advance("1500 millis", "50 millis")
      const failed = failures(yield* c.events.get).filter((f) => f.operation === "acquire")
      // The first acquire (sent at t0) fails at t0 + 1 s, the second (t0 + 300 ms) at t0 + 1.3 s.
      expect(failed.slice(0, 2).map((f) => f.at - t0)).toEqual([RENEW, 300 + RENEW])
      yield* c.faults.resume
    }))

  it.scoped("a reply that arrives after its call timed out is dropped, and the election still wins", () =>
    Effect.gen(function*() {
      const c = yield* openedClient
      yield* c.faults.slow("1500 millis", { only: "acquire" })
      const election = yield* c.client.election("late")
      yield* advance("1200 millis", "50 millis")
      const failed = failures(yield* c.events.get).filter((f) => f.operation === "acquire")
      expect(failed).toHaveLength(1)
      expect(failed[0]!.error).toContain("timed out")
      // The late reply (a grant the engine no longer waits for) is given back; the retry wins.
      yield* c.faults.heal
      yield* advance("5 seconds")
      expect(Option.isSome(yield* election.term)).toBe(true)
      expect(failures(yield* c.events.get).filter((f) => f.operation === "acquire")).toHaveLength(1)
    }))

  it.scoped("a call still in flight when the client closes is interrupted by the close (calls run outside the scope's fibers)", () =>
    Effect.gen(function*() {
      const memory = yield* MemoryBackend.make()
      const interrupted = yield* Ref.make(0)
      // Every acquire hangs until interrupted; the rest is the memory backend's.
      const hanging: LeaseBackend.LeaseBackendService = {
        ...memory,
        acquire: () => Effect.never.pipe(Effect.onInterrupt(() => Ref.update(interrupted, (n) => n + 1)))
      }
      const scope = yield* Scope.make()
      const client = yield* Simba.make({ leaseDuration: "3 seconds" }).pipe(
        Effect.provideService(LeaseBackend.LeaseBackend, hanging),
        Scope.extend(scope),
        Effect.orDie
      )
      yield* advance("100 millis")
      yield* client.election("hung").pipe(Scope.extend(scope))
      yield* advance("100 millis")
      // Sent, not answered, not timed out (its deadline is 1 s away).
      expect(yield* Ref.get(interrupted)).toBe(0)
      yield* Scope.close(scope, Exit.void)
      expect(yield* Ref.get(interrupted)).toBe(1)
    }))
})
