/**
 * How to serve the operations endpoint beside a client, as `SimbaHttp`'s module comment shows it:
 * `SimbaHttp.layer` needs `Simba`, so it is given the client's layer with `Layer.provide` or
 * `Layer.provideMerge`; `Layer.merge` leaves `Simba` required (checked at the type level here, by
 * `tsc`). The snippets run on the real Redis (127.0.0.1:6379) over a real HTTP port.
 */
import { describe, expect, it } from "@effect/vitest"
import { Effect, Fiber, Layer, Schedule } from "effect"
import { randomBytes } from "node:crypto"
import { Simba } from "simba"
import { SimbaHttp } from "simba/http"
import { SimbaRedisLive } from "simba/redis"
import { freePort } from "../support/processes.js"

// The form that does not work: the merged layer still needs a `Simba` from outside.
const merged = Layer.merge(SimbaRedisLive, SimbaHttp.layer({ port: 9464 }))
const stillNeedsSimba: Layer.Layer.Context<typeof merged> extends Simba.Simba ? true : false = true

/** GET `path` on the port, retried while the server starts or the session opens (health 503). */
const get = (port: number, path: string) =>
  Effect.tryPromise(() => fetch(`http://127.0.0.1:${port}${path}`).then(async (r) => ({ status: r.status, body: await r.text() }))).pipe(
    Effect.filterOrFail((r) => r.status === 200),
    Effect.retry(Schedule.spaced("100 millis").pipe(Schedule.compose(Schedule.recurs(100)))),
    Effect.orElseSucceed(() => ({ status: 0, body: "" }))
  )

describe("serving SimbaHttp beside a client", () => {
  it("Layer.merge leaves Simba required", () => {
    expect(stillNeedsSimba).toBe(true)
  })

  it.live("the endpoint alone: SimbaHttp.layer(...).pipe(Layer.provide(SimbaRedisLive)), launched", () =>
    Effect.gen(function*() {
      const port = yield* Effect.promise(freePort)
      const server = yield* Effect.fork(Layer.launch(SimbaHttp.layer({ port }).pipe(Layer.provide(SimbaRedisLive))))
      expect((yield* get(port, "/simba/health")).status).toBe(200)
      expect((yield* get(port, "/metrics")).body).toContain("# TYPE simba_backend_calls_total counter")
      yield* Fiber.interrupt(server)
    }))

  it.live("beside the application: Layer.provideMerge(SimbaRedisLive), one client for both", () =>
    Effect.gen(function*() {
      const port = yield* Effect.promise(freePort)
      const SimbaWithHttp = SimbaHttp.layer({ port }).pipe(Layer.provideMerge(SimbaRedisLive))
      const name = `http-compose.${randomBytes(6).toString("hex")}`
      yield* Effect.gen(function*() {
        // The application's election shows in the endpoint's snapshot: the same client.
        yield* Simba.election(name)
        const snapshot = yield* get(port, "/simba")
        expect(snapshot.status).toBe(200)
        expect(JSON.parse(snapshot.body).elections).toEqual([expect.objectContaining({ name })])
      }).pipe(Effect.provide(SimbaWithHttp), Effect.scoped)
    }))
})
