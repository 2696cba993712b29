import { HttpApp } from "@effect/platform"
import { describe, expect, it } from "@effect/vitest"
import { Effect, Layer } from "effect"
import { LeaseBackend, MemoryBackend, Simba, SimbaHttp, SimbaTest } from "simba"
import { advance } from "./helpers.js"

describe("operations endpoint", () => {
  it.scoped("GET /simba answers the snapshot; GET /simba/health is 200 while LIVE, 503 when not", () =>
    Effect.gen(function*() {
      const memory = yield* MemoryBackend.make
      const link = yield* SimbaTest.faulty(memory)
      const client = yield* Simba.make({ leaseDuration: "3 seconds" }).pipe(
        Effect.provideService(LeaseBackend.LeaseBackend, link.backend)
      )
      yield* client.election("reporter")
      yield* advance("200 millis")
      const runtime = yield* Layer.toRuntime(Layer.succeed(Simba.Simba, client))
      const handler = HttpApp.toWebHandlerRuntime(runtime)(Effect.flatten(SimbaHttp.router))
      const get = (path: string) => Effect.promise(() => handler(new Request(`http://localhost${path}`)))

      const snapshot = yield* get("/simba")
      expect(snapshot.status).toBe(200)
      const body = (yield* Effect.promise(() => snapshot.json())) as {
        readonly session: { readonly status: string }
        readonly elections: ReadonlyArray<unknown>
      }
      expect(body.session.status).toBe("LIVE")
      expect(body.elections).toEqual([
        expect.objectContaining({ name: "reporter", kind: "election", status: "LEADER", token: "1" })
      ])
      expect((yield* get("/simba/health")).status).toBe(200)

      // Renewals stop getting through: SUSPENDED, then the deadline passes and it is OPENING.
      yield* link.faults.pause()
      yield* advance("4 seconds")
      const health = yield* get("/simba/health")
      expect(health.status).toBe(503)
      const healthBody = (yield* Effect.promise(() => health.json())) as { readonly status: string }
      expect(healthBody.status).not.toBe("LIVE")
    }))
})
