/**
 * The backend's reserved connections (`lanes.ts`) on a real PostgreSQL: calls waiting for a lane are
 * served in arrival order, and one interrupted while it waits takes no lane with it.
 */
import * as SqlClient from "@effect/sql/SqlClient"
import * as PgClient from "@effect/sql-pg/PgClient"
import { describe, expect, it } from "@effect/vitest"
import * as Effect from "effect/Effect"
import * as Fiber from "effect/Fiber"
import * as Redacted from "effect/Redacted"
import * as Lanes from "../../src/layers/sql/lanes.js"
import { pgUrl } from "./SqlServers.js"

const pgClient = PgClient.layer({ url: Redacted.make(pgUrl), maxConnections: 3 })

/** One lane, reserved before the case starts (reserving waits for the pool). */
const oneLane = Effect.gen(function*() {
  const lanes = yield* Lanes.make(yield* SqlClient.SqlClient, 1)
  yield* lanes.run("SELECT 1", [])
  return lanes
})

describe("SQL lanes (postgres)", () => {
  it.scopedLive("a call waiting for a lane is not passed by one started as the lane comes free", () =>
    Effect.gen(function*() {
      const lanes = yield* oneLane
      const order: Array<string> = []
      const call = (label: string, statement: string) =>
        Effect.tap(lanes.run(statement, []), () => Effect.sync(() => order.push(label)))
      // `first` holds the only lane and `waiting` queues for it. When `first` ends, its caller starts
      // `later` at once (as a reply's step starts the next call): the lane is free then, but `waiting`
      // asked first.
      const first = yield* Effect.fork(
        Effect.flatMap(call("first", "SELECT pg_sleep(0.2)"), () => Effect.forkDaemon(call("later", "SELECT 1")))
      )
      yield* Effect.sleep("50 millis")
      const waiting = yield* Effect.fork(call("waiting", "SELECT 1"))
      const later = yield* Fiber.join(first)
      yield* Fiber.join(waiting)
      yield* Fiber.join(later)
      expect(order).toEqual(["first", "waiting", "later"])
    }).pipe(Effect.provide(pgClient)))

  it.scopedLive("a call interrupted while it waits for a lane leaves the lane to the next", () =>
    Effect.gen(function*() {
      const lanes = yield* oneLane
      const first = yield* Effect.fork(lanes.run("SELECT pg_sleep(0.2)", []))
      yield* Effect.sleep("50 millis")
      const gaveUp = yield* Effect.fork(lanes.run("SELECT 1", []))
      yield* Effect.sleep("20 millis")
      yield* Fiber.interrupt(gaveUp)
      yield* Fiber.join(first)
      const rows = yield* lanes.run("SELECT 2 AS n", []).pipe(Effect.timeout("5 seconds"))
      expect(rows).toEqual([{ n: 2 }])
    }).pipe(Effect.provide(pgClient)))
})
