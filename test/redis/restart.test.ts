/**
 * Redis restarted under live clients (no persistence): the sessions are gone, the terms end, each
 * client opens a new session and competes again, and no two leaders ever overlap in time.
 */
import { describe, expect, it } from "@effect/vitest"
import { Clock, Effect, Option, Ref, Schedule, Stream } from "effect"
import { LeaseBackend, Simba, type SimbaEvent } from "simba"
import { RedisBackend } from "simba/redis"
import { privateServer, uniqueName } from "./RedisServers.js"

describe("Redis restarted under live clients", () => {
  it.scopedLive("terms end, new sessions are opened, one leader again, never two at once", () =>
    Effect.gen(function*() {
      const server = yield* privateServer()
      const name = uniqueName("restart")
      // Leadership intervals as seen by the clients themselves: [elected, revoked) per term.
      const log = yield* Ref.make<ReadonlyArray<{ client: number; at: number; event: SimbaEvent }>>([])
      const clients = yield* Effect.forEach([0, 1], (i) =>
        Effect.gen(function*() {
          const backend = yield* RedisBackend.make({ port: server.port, commandTimeout: "300 millis", lockDelay: "1500 millis" })
          const client = yield* Simba.make({ leaseDuration: "1500 millis", margin: "100 millis" }).pipe(
            Effect.provideService(LeaseBackend.LeaseBackend, backend)
          )
          yield* client.events.pipe(
            Stream.runForEach((event) =>
              Effect.flatMap(Clock.currentTimeMillis, (at) => Ref.update(log, (all) => [...all, { client: i, at, event }]))
            ),
            Effect.forkScoped
          )
          return client
        }))
      const elections = yield* Effect.forEach(clients, (client) => client.election(name))
      const leaders = Effect.map(Effect.forEach(elections, (e) => e.status), (all) => all.filter((s) => s === "LEADER").length)
      yield* leaders.pipe(Effect.repeat({ until: (n) => n === 1, schedule: Schedule.spaced("20 millis") }), Effect.timeout("10 seconds"))
      const leaderIndex = (yield* Effect.forEach(elections, (e) => e.status)).indexOf("LEADER")
      const firstTerm = Option.getOrThrow(yield* elections[leaderIndex]!.term)
      const firstSessions = yield* Effect.forEach(clients, (c) => Effect.map(c.snapshot, (s) => s.session.id))

      yield* server.kill
      yield* Effect.sleep("300 millis")
      yield* server.start

      // The old term ends (its renewals fail, or the new server says the session expired)...
      const reason = yield* firstTerm.revoked.pipe(Effect.timeout("10 seconds"))
      expect(["DEADLINE_PASSED", "SESSION_EXPIRED"]).toContain(reason)
      // ...both clients open new sessions and one of them leads again.
      yield* Effect.gen(function*() {
        const sessions = yield* Effect.forEach(clients, (c) => c.snapshot)
        const fresh = sessions.every((s, i) => s.session.status === "LIVE" && s.session.id !== firstSessions[i])
        return fresh && (yield* leaders) === 1
      }).pipe(Effect.repeat({ until: (ok) => ok, schedule: Schedule.spaced("50 millis") }), Effect.timeout("15 seconds"))

      // Never two leaders: sort every Elected/Revoked of the name in time and count.
      const events = (yield* Ref.get(log)).filter((r) =>
        (r.event._tag === "Elected" || r.event._tag === "Revoked") && r.event.name === name
      )
      let current = 0
      let max = 0
      for (const r of [...events].sort((a, b) => a.at - b.at || (a.event._tag === "Revoked" ? -1 : 1))) {
        current += r.event._tag === "Elected" ? 1 : -1
        max = Math.max(max, current)
      }
      expect(max).toBe(1)
      expect(events.filter((r) => r.event._tag === "Elected").length).toBeGreaterThanOrEqual(2)
      // No persistence: the new server started counting tokens again (README explains AOF).
      const second = yield* Effect.forEach(elections, (e) => e.term)
      expect(second.filter(Option.isSome)).toHaveLength(1)
    }), 60_000)
})
