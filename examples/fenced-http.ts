/**
 * Fenced HTTP: an inventory service behind `FencedHttp.middleware` refuses a request whose fencing
 * token is below the highest it has seen for the resource (409), and the client, wrapped with
 * `FencedHttp.withFence`, gets that refusal back as `FencedWriteRejectedError`.
 *
 *   npx tsx examples/fenced-http.ts
 *
 * One process plays both sides here, on a random loopback port; the locks come from the in-memory
 * backend. Worker A takes the lock, reserves, then stalls holding its term; worker B takes the lock
 * (a higher token) and reserves; A wakes up and sends its late request: refused.
 */
import * as HttpClient from "@effect/platform/HttpClient"
import * as HttpClientRequest from "@effect/platform/HttpClientRequest"
import * as HttpRouter from "@effect/platform/HttpRouter"
import * as HttpServer from "@effect/platform/HttpServer"
import * as HttpServerResponse from "@effect/platform/HttpServerResponse"
import { NodeHttpClient, NodeHttpServer } from "@effect/platform-node"
import { Effect, Either, Layer, Ref } from "effect"
import { createServer } from "node:http"
import { Simba, SimbaMemoryLive } from "simba"
// In your app: import * as FencedHttp from "simba/fencing/http"
import * as FencedHttp from "../src/fencing/FencedHttp.js"

const program = Effect.gen(function*() {
  // --- the protected service ------------------------------------------------------------------
  const reservations = yield* Ref.make<ReadonlyArray<string>>([])
  const router = HttpRouter.empty.pipe(
    HttpRouter.post(
      "/reserve/:who",
      Effect.flatMap(HttpRouter.params, ({ who }) =>
        Effect.as(Ref.update(reservations, (all) => [...all, who ?? "?"]), HttpServerResponse.text("reserved")))
    )
  )
  const fenced = FencedHttp.middleware(yield* FencedHttp.memoryStore)
  yield* HttpServer.serveEffect(fenced(router))
  const url = yield* HttpServer.addressFormattedWith(Effect.succeed)

  // --- the lock holders -----------------------------------------------------------------------
  const reserve = (who: string, term: { readonly token: bigint }) =>
    Effect.flatMap(HttpClient.HttpClient, (client) =>
      client.pipe(
        HttpClient.mapRequest(HttpClientRequest.prependUrl(url)),
        FencedHttp.withFence("inventory:sku-42", term), // before filterStatusOk, so it sees the 409
        HttpClient.filterStatusOk
      ).post(`/reserve/${encodeURIComponent(who)}`)).pipe(Effect.flatMap((response) => response.text), Effect.scoped)

  const termA = yield* Simba.withLock("sku-42", (term) => Effect.as(reserve("a", term), term))
  console.log(`A reserved with token ${termA.token}, then stalled`)
  yield* Simba.withLock("sku-42", (term) =>
    Effect.zipRight(reserve("b", term), Effect.sync(() => console.log(`B reserved with token ${term.token}`))))

  const late = yield* Effect.either(reserve("a-late", termA))
  if (Either.isLeft(late) && late.left._tag === "FencedWriteRejectedError") {
    console.log(`A's late request was refused: ${late.left.message}`)
  } else {
    console.log("A's late request was NOT refused: this should never happen")
  }
  console.log(`reservations: ${(yield* Ref.get(reservations)).join(", ")}`)
})

const ServerLive = NodeHttpServer.layer(() => createServer(), { port: 0, host: "127.0.0.1" })

program.pipe(
  Effect.scoped,
  Effect.provide(Layer.mergeAll(SimbaMemoryLive, ServerLive, NodeHttpClient.layerUndici)),
  Effect.runPromise
).then(
  () => process.exit(0),
  (error: unknown) => {
    console.error(error)
    process.exit(1)
  }
)
