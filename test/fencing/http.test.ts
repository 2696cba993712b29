/**
 * `simba/fencing/http` over real HTTP: a Node server on a random loopback port (`NodeHttpServer.layerTest`,
 * one per test) running an app behind `FencedHttp.middleware`, and the `HttpClient` it provides,
 * wrapped with `FencedHttp.withFence`.
 */
import * as HttpClient from "@effect/platform/HttpClient"
import * as HttpClientRequest from "@effect/platform/HttpClientRequest"
import * as HttpRouter from "@effect/platform/HttpRouter"
import * as HttpServer from "@effect/platform/HttpServer"
import * as HttpServerResponse from "@effect/platform/HttpServerResponse"
import { NodeHttpServer } from "@effect/platform-node"
import { describe, expect, it } from "@effect/vitest"
import * as Arr from "effect/Array"
import * as Deferred from "effect/Deferred"
import * as Effect from "effect/Effect"
import * as Either from "effect/Either"
import * as Fiber from "effect/Fiber"
import * as Option from "effect/Option"
import * as Random from "effect/Random"
import * as Ref from "effect/Ref"
import * as FencedHttp from "../../src/fencing/FencedHttp.js"
import { type FenceStore, FencedWriteRejectedError, InvalidFenceError, memoryStore } from "../../src/fencing/Fencing.js"
import * as SimbaTest from "../../src/SimbaTest.js"

/**
 * The protected service: `POST /write/:value` appends `value` (and the token the request carried) to
 * a log; `hold` lets a test keep one request inside the handler.
 */
const service = (options?: FencedHttp.MiddlewareOptions & { readonly store?: FenceStore }) =>
  Effect.gen(function*() {
    const log = yield* Ref.make<ReadonlyArray<string>>([])
    const holds = yield* Ref.make<
      ReadonlyArray<{ readonly value: string; readonly entered: Deferred.Deferred<void>; readonly until: Deferred.Deferred<void> }>
    >([])
    const app = HttpRouter.empty.pipe(
      HttpRouter.post(
        "/write/:value",
        Effect.gen(function*() {
          const { value } = yield* HttpRouter.params
          const fence = yield* FencedHttp.requestFence
          const token = fence.pipe(Option.flatMap(Option.liftPredicate(Either.isRight)), Option.map((f) => f.right.token))
          const hold = (yield* Ref.get(holds)).find((h) => h.value === value)
          if (hold !== undefined) {
            yield* Deferred.succeed(hold.entered, undefined)
            yield* Deferred.await(hold.until)
          }
          yield* Ref.update(log, (l) => [...l, `${value}@${Option.getOrElse(token, () => "none")}`])
          return HttpServerResponse.text("ok")
        })
      )
    )
    const store = options?.store ?? (yield* memoryStore)
    yield* HttpServer.serveEffect(FencedHttp.middleware(store, options)(app))
    const client = yield* HttpClient.HttpClient
    return {
      log: Ref.get(log),
      /** Keeps the request writing `value` inside the handler until `release`. */
      hold: (value: string) =>
        Effect.gen(function*() {
          const entered = yield* Deferred.make<void>()
          const until = yield* Deferred.make<void>()
          yield* Ref.update(holds, (h) => [...h, { value, entered, until }])
          return { entered: Deferred.await(entered), release: Deferred.succeed(until, undefined) }
        }),
      /** A fenced write, through `withFence`. */
      write: (resource: string, token: bigint | { readonly token: bigint }, value: string) =>
        client.pipe(FencedHttp.withFence(resource, token), HttpClient.filterStatusOk).post(`/write/${value}`).pipe(
          Effect.flatMap((response) => response.text),
          Effect.scoped
        ),
      /** A raw request with any headers, answering the status, the body and the highest-token header. */
      raw: (value: string, headers: Record<string, string>) =>
        client.execute(HttpClientRequest.post(`/write/${value}`).pipe(HttpClientRequest.setHeaders(headers))).pipe(
          Effect.flatMap((response) =>
            Effect.map(response.text, (body) => ({
              status: response.status,
              body,
              highest: response.headers[FencedHttp.highestHeader]
            }))
          ),
          Effect.scoped
        )
    }
  })

describe("simba/fencing/http", () => {
  it.live("a paused writer's late request is refused with 409 after a newer token wrote", () =>
    Effect.gen(function*() {
      const s = yield* service()
      expect(yield* s.write("orders", 41n, "former")).toBe("ok")
      // the former holder pauses; its successor writes with the next term's token
      expect(yield* s.write("orders", { token: 42n }, "successor")).toBe("ok")
      // the former holder wakes up: the client fails with the same typed error the resource decided
      const error = yield* Effect.flip(s.write("orders", 41n, "stale"))
      expect(error).toBeInstanceOf(FencedWriteRejectedError)
      expect(error).toMatchObject({ resource: "orders", token: 41n, highest: 42n })
      // on the wire: 409, the highest token in a header, a JSON body
      const raw = yield* s.raw("stale2", { [FencedHttp.tokenHeader]: "orders=41" })
      expect(raw.status).toBe(409)
      expect(raw.highest).toBe("42")
      expect(JSON.parse(raw.body)).toEqual({
        error: "FencedWriteRejectedError",
        resource: "orders",
        token: "41",
        highest: "42"
      })
      expect(yield* s.log).toEqual(["former@41", "successor@42"])
    }).pipe(Effect.scoped, Effect.provide(NodeHttpServer.layerTest)))

  it.live("the same term may write twice (equal token); resources are fenced independently", () =>
    Effect.gen(function*() {
      const s = yield* service()
      yield* s.write("orders", 7n, "a")
      yield* s.write("orders", 7n, "b")
      yield* s.write("invoices:2024", 1n, "c") // another resource starts from nothing
      yield* s.write("orders", 8n, "d")
      expect(yield* Effect.flip(s.write("orders", 7n, "e"))).toBeInstanceOf(FencedWriteRejectedError)
      expect(yield* s.log).toEqual(["a@7", "b@7", "c@1", "d@8"])
    }).pipe(Effect.scoped, Effect.provide(NodeHttpServer.layerTest)))

  it.live("requests without the header pass through, or get 428 when the token is required; malformed ones get 400", () =>
    Effect.gen(function*() {
      const open = yield* service()
      expect((yield* open.raw("plain", {})).status).toBe(200)
      for (const bad of ["orders", "=5", "orders=", "orders=0", "orders=-1", "orders=05", "orders=abc", "or ders=5", "orders=99999999999999999999"]) {
        const reply = yield* open.raw("bad", { [FencedHttp.tokenHeader]: bad })
        expect({ bad, status: reply.status }).toEqual({ bad, status: 400 })
      }
      expect(yield* open.log).toEqual(["plain@none"])
      // and the client refuses to send a bad fence at all
      expect(yield* Effect.flip(open.write("or ders", 1n, "x"))).toBeInstanceOf(InvalidFenceError)
      expect(yield* Effect.flip(open.write("orders", 0n, "x"))).toBeInstanceOf(InvalidFenceError)
    }).pipe(Effect.scoped, Effect.provide(NodeHttpServer.layerTest)))

  it.live("a FencedWriteRejectedError from the app itself (a fenced write it made) answers 409 as well", () =>
    Effect.gen(function*() {
      const app = Effect.fail(new FencedWriteRejectedError({ resource: "db:orders", token: 3n, highest: 4n }))
      yield* HttpServer.serveEffect(FencedHttp.middleware(yield* memoryStore)(app))
      const client = yield* HttpClient.HttpClient
      const reply = yield* client.post("/anything").pipe(
        Effect.flatMap((response) =>
          Effect.map(response.json, (body) => ({ status: response.status, highest: response.headers[FencedHttp.highestHeader], body }))),
        Effect.scoped
      )
      expect(reply).toEqual({
        status: 409,
        highest: "4",
        body: { error: "FencedWriteRejectedError", resource: "db:orders", token: "3", highest: "4" }
      })
    }).pipe(Effect.scoped, Effect.provide(NodeHttpServer.layerTest)))

  it.live("required: a request without the token gets 428", () =>
    Effect.gen(function*() {
      const strict = yield* service({ required: true })
      expect((yield* strict.raw("plain", {})).status).toBe(428)
      expect(yield* strict.write("orders", 1n, "fenced")).toBe("ok")
      expect(yield* strict.log).toEqual(["fenced@1"])
    }).pipe(Effect.scoped, Effect.provide(NodeHttpServer.layerTest)))

  it.live("a racing lower token waits for the request being handled, then is refused; a higher one is handled after", () =>
    Effect.gen(function*() {
      const s = yield* service()
      yield* s.write("orders", 10n, "start")
      const twenty = yield* s.hold("twenty")
      const holder = yield* Effect.fork(s.write("orders", 20n, "twenty"))
      yield* twenty.entered // "twenty" is inside the handler now, holding the resource
      const lower = yield* Effect.fork(Effect.either(s.write("orders", 15n, "fifteen")))
      const higher = yield* Effect.fork(s.write("orders", 30n, "thirty"))
      yield* Effect.sleep("200 millis")
      expect(lower.unsafePoll()).toBeNull()
      expect(higher.unsafePoll()).toBeNull()
      yield* twenty.release
      yield* Fiber.join(holder)
      yield* Fiber.join(higher)
      const lowerResult = yield* Fiber.join(lower)
      expect(Either.isLeft(lowerResult) && lowerResult.left).toBeInstanceOf(FencedWriteRejectedError)
      expect(yield* s.log).toEqual(["start@10", "twenty@20", "thirty@30"])
    }).pipe(Effect.scoped, Effect.provide(NodeHttpServer.layerTest)))

  it.live("many concurrent writers: handled requests are in token order, every refusal saw a higher token", () =>
    Effect.gen(function*() {
      const s = yield* service()
      const tokens = Arr.fromIterable(yield* Random.shuffle(Arr.range(1, 24)))
      const outcomes = yield* Effect.all(
        tokens.map((n) => Effect.either(s.write("orders", BigInt(n), `v${n}`))),
        { concurrency: "unbounded" }
      )
      const handled = (yield* s.log).map((entry) => Number(entry.split("@")[1]))
      expect(handled).toEqual([...handled].sort((a, b) => a - b))
      expect(handled.at(-1)).toBe(24)
      const refused = outcomes.flatMap((o) => (o._tag === "Left" ? [o.left] : []))
      expect(refused.length + handled.length).toBe(24)
      for (const error of refused) {
        expect(error).toBeInstanceOf(FencedWriteRejectedError)
        if (error instanceof FencedWriteRejectedError) expect(error.highest).toBeGreaterThan(error.token)
      }
    }).pipe(Effect.scoped, Effect.provide(NodeHttpServer.layerTest)))

  it.scoped("with Simba terms: a lock holder paused past its lease has its late request refused", () =>
    Effect.gen(function*() {
      const s = yield* service()
      const net = yield* SimbaTest.network
      const [a, b] = yield* SimbaTest.makeClients(net, 2, { leaseDuration: "3 seconds" })
      const termA = yield* a!.client.lock("orders")
      expect(yield* s.write("orders", termA, "a")).toBe("ok")
      yield* a!.faults.pause() // a stalls: its renewals never arrive
      const bWrites = yield* Effect.fork(b!.client.withLock("orders", (term) => s.write("orders", term, "b")))
      yield* SimbaTest.advance("5 seconds") // a's lease runs out, b takes over
      expect(yield* Fiber.join(bWrites)).toBe("ok")
      expect(yield* termA.isValid).toBe(false)
      const late = yield* Effect.flip(s.write("orders", termA, "a, late"))
      expect(late).toMatchObject({ _tag: "FencedWriteRejectedError", token: termA.token })
      expect(yield* s.log).toEqual([`a@${termA.token}`, `b@${(late as FencedWriteRejectedError).highest}`])
    }).pipe(Effect.provide(NodeHttpServer.layerTest)))
})
