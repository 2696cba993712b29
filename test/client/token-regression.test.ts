/**
 * Regressions made loud (issue 12 item 3, README "Token regressions"), on the Memory backend under
 * TestClock: the store behind a running client is swapped for a fresh one (a restart without
 * persistence), so the tokens of a name start again from 1. The client publishes `TokenRegressed`,
 * logs it at Error, and starts no term of the name for one lease duration; then it leads again.
 */
import { describe, expect, it } from "@effect/vitest"
import { Clock, Effect, HashMap, Logger, Ref } from "effect"
import { type LeaseBackend, MemoryBackend, type Term } from "simba"
import { advance, config, makeClient } from "./helpers.js"

type Service = LeaseBackend.LeaseBackendService

/** A backend whose store can be replaced while clients run (the hints stay the first store's). */
const swappable = (initial: Service) =>
  Effect.map(Ref.make(initial), (current) => {
    const via = <A, E>(f: (b: Service) => Effect.Effect<A, E>) => Effect.flatMap(Ref.get(current), f)
    const backend: Service = {
      backend: initial.backend,
      holds: initial.holds,
      openSession: (ttl) => via((b) => b.openSession(ttl)),
      keepAlive: (sessionId, ttl, known) => via((b) => b.keepAlive(sessionId, ttl, known)),
      closeSession: (sessionId) => via((b) => b.closeSession(sessionId)),
      acquire: (sessionId, name) => via((b) => b.acquire(sessionId, name)),
      release: (sessionId, name, token) => via((b) => b.release(sessionId, name, token)),
      withdraw: (sessionId, name) => via((b) => b.withdraw(sessionId, name)),
      join: (sessionId, group) => via((b) => b.join(sessionId, group)),
      leave: (sessionId, group) => via((b) => b.leave(sessionId, group)),
      members: (group) => via((b) => b.members(group)),
      hints: initial.hints
    }
    return { backend, swap: (next: Service) => Ref.set(current, next) }
  })

// leaseDuration 3 s, drift 0.01, margin 50 ms: the quiet period is 3 s × 1.01 + 50 ms.
const QUIET = 3000 * 1.01 + 50

describe("token regressions on a client", () => {
  it.scoped("a store that restarts without its state: TokenRegressed, an Error log, no term for one lease duration, then a term above the regressed token", () =>
    Effect.gen(function*() {
      const errors = yield* Ref.make<ReadonlyArray<{ message: string; annotations: Record<string, unknown> }>>([])
      const collector = Logger.make(({ annotations, logLevel, message }) => {
        if (logLevel._tag !== "Error") return
        const line = { message: String(message), annotations: Object.fromEntries(HashMap.toEntries(annotations)) }
        Effect.runSync(Ref.update(errors, (all) => [...all, line]))
      })
      const store = yield* swappable(yield* MemoryBackend.make())
      const c = yield* makeClient(store.backend, config).pipe(Effect.provide(Logger.replace(Logger.defaultLogger, collector)))
      yield* advance("100 millis")
      for (let i = 0; i < 3; i++) yield* c.client.withLock("job", Effect.void)

      yield* store.swap(yield* MemoryBackend.make())
      const started = yield* Ref.make<ReadonlyArray<{ at: number; token: bigint }>>([])
      yield* Effect.fork(c.client.withLock("job", (term: Term.Term) =>
        Effect.flatMap(Clock.currentTimeMillis, (at) => Ref.update(started, (all) => [...all, { at, token: term.token }]))
      ))
      yield* advance("5 seconds")

      const regressed = (yield* c.events.get).filter((r) => r.event._tag === "TokenRegressed")
      expect(regressed.map((r) => r.event)).toEqual([
        expect.objectContaining({ _tag: "TokenRegressed", name: "job", seen: 3n, token: 1n })
      ])
      // The term starts only after the quiet period, above the regressed token.
      const [run] = yield* Ref.get(started)
      expect(run?.token).toBe(2n)
      expect(run!.at - regressed[0]!.at).toBeGreaterThanOrEqual(QUIET)
      const logged = (yield* Ref.get(errors)).filter((l) => l.message.includes("TokenRegressed job"))
      expect(logged).toEqual([
        expect.objectContaining({ annotations: expect.objectContaining({ lease: "job", seen: "3", token: "1", backend: "memory" }) })
      ])
    }))
})
