/**
 * Operations endpoint (docs/operations.md): `GET /simba` answers the client's snapshot as JSON,
 * `GET /simba/health` answers 200 while the session is `LIVE` and 503 otherwise (for load balancers
 * and orchestrators' readiness checks), `GET /metrics` answers Effect's metric registry in the
 * Prometheus text format (version 0.0.4) for a Prometheus scrape.
 *
 * `SimbaHttp.layer` needs `Simba`, so give it the client's layer with `Layer.provide` (the
 * endpoint alone) or `Layer.provideMerge` (the endpoint, and the same client for the application);
 * `Layer.merge(SimbaRedisLive, SimbaHttp.layer(...))` would leave `Simba` required:
 *
 * ```ts
 * import { NodeRuntime } from "@effect/platform-node"
 * import { Effect, Layer } from "effect"
 * import { Simba } from "simba"
 * import { SimbaHttp } from "simba/http"
 * import { SimbaRedisLive } from "simba/redis"
 *
 * // The endpoint alone:
 * Layer.launch(SimbaHttp.layer({ port: 9464 }).pipe(Layer.provide(SimbaRedisLive))).pipe(NodeRuntime.runMain)
 *
 * // The endpoint beside the application, both on one client:
 * const SimbaWithHttp = SimbaHttp.layer({ port: 9464 }).pipe(Layer.provideMerge(SimbaRedisLive))
 * Simba.runWhileLeader("reporter", () => Effect.never).pipe(Effect.provide(SimbaWithHttp), NodeRuntime.runMain)
 * ```
 * or mount `SimbaHttp.router` in an application's own `HttpRouter`.
 */
import * as HttpRouter from "@effect/platform/HttpRouter"
import * as HttpServer from "@effect/platform/HttpServer"
import * as HttpServerResponse from "@effect/platform/HttpServerResponse"
import * as NodeHttpServer from "@effect/platform-node/NodeHttpServer"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Metric from "effect/Metric"
import { createServer } from "node:http"
import * as Prometheus from "./internal/prometheus.js"
import * as Simba from "./Simba.js"

/** The snapshot as plain JSON: tokens as decimal strings, remaining times in milliseconds. */
export const snapshotJson = (snapshot: Simba.SimbaSnapshot) => ({
  session: {
    id: snapshot.session.id ?? null,
    status: snapshot.session.status,
    remainingMillis: Duration.toMillis(snapshot.session.remaining)
  },
  elections: snapshot.elections.map((e) => ({
    name: e.name,
    kind: e.kind,
    status: e.status,
    token: e.token === undefined ? null : e.token.toString(),
    remainingMillis: Duration.toMillis(e.remaining)
  })),
  groups: snapshot.groups.map((g) => ({
    group: g.group,
    partitions: g.partitions,
    members: g.members,
    owned: g.owned
  })),
  cached: snapshot.cached.map((c) => ({ name: c.name, token: c.token.toString(), remainingMillis: Duration.toMillis(c.remaining) }))
})

/** Effect's metric registry (Simba's metrics and the application's) in the Prometheus text format. */
export const prometheusText: Effect.Effect<string> = Effect.map(Metric.snapshot, Prometheus.format)

/** The routes, for mounting in an application's own router. */
export const router = HttpRouter.empty.pipe(
  HttpRouter.get(
    "/metrics",
    Effect.map(prometheusText, (text) => HttpServerResponse.text(text, { contentType: Prometheus.contentType }))
  ),
  HttpRouter.get("/simba", Effect.map(Simba.snapshot, (snapshot) => HttpServerResponse.unsafeJson(snapshotJson(snapshot)))),
  HttpRouter.get(
    "/simba/health",
    Effect.map(Simba.snapshot, (snapshot) =>
      HttpServerResponse.unsafeJson(
        { status: snapshot.session.status },
        { status: snapshot.session.status === "LIVE" ? 200 : 503 }
      ))
  )
)

/** Serves `router` on its own Node HTTP server. */
export const layer = (options: { readonly port: number; readonly host?: string | undefined }) =>
  HttpServer.serve(router).pipe(
    Layer.provide(NodeHttpServer.layer(() => createServer(), { port: options.port, host: options.host }))
  )
