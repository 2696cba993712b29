/**
 * The real Redis servers the Redis tests run against: the single node on 127.0.0.1:6379 and the
 * 3-master cluster on 127.0.0.1:7000-7002 (both started by `scripts/services.sh`, which `npm test` runs
 * first), plus private `redis-server` processes that a failure test may kill, pause or demote. Also
 * raw ioredis clients to look at the keys, and a hint watcher.
 */
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Schedule from "effect/Schedule"
import type * as Scope from "effect/Scope"
import * as Stream from "effect/Stream"
import * as SubscriptionRef from "effect/SubscriptionRef"
import { Cluster, Redis } from "ioredis"
import { randomBytes } from "node:crypto"
import type { Hint, LeaseBackendService } from "../../src/LeaseBackend.js"
import * as RedisBackend from "../../src/layers/redis/RedisBackend.js"
import * as Scripts from "../../src/layers/redis/scripts.js"
import { freePort as supportFreePort } from "../support/processes.js"
import { freedOf, waitHintOf } from "../tck/TckHarness.js"
import { type PrivateRedis, startPrivateCluster, startPrivateRedis } from "../support/redisServer.js"

export const singleNode: RedisBackend.RedisOptions = { url: "redis://127.0.0.1:6379" }

export const clusterNodes = [7000, 7001, 7002].map((port) => ({ host: "127.0.0.1", port }))

export const cluster: RedisBackend.RedisOptions = { cluster: { nodes: clusterNodes } }

/** Session ttl of the real-time suites: short, so expiry tests stay quick. */
export const ttl = "1500 millis"

/**
 * Client timing of the TCK's client-level cases on the real servers: leases of `ttl`, and a margin
 * larger than the 50 ms default, so that a loaded 2-core machine running test files in parallel
 * (event-loop stalls of hundreds of ms: ten clients share one process there) does not interrupt a
 * revoked leader's work only after the server has already let a successor in (what the "never two
 * owners" counters measure). With 250 ms the cluster multi-contend counter once saw two owners in
 * a full clean-clone run; it did not come back in isolation nor under extra CPU load, so a stall
 * of the test process is the likely cause, not the protocol.
 */
export const clientTiming = { leaseDuration: ttl, margin: "400 millis" } as const

/** The three ways the backend runs: one script per call on one node, per-slot calls on one node, and a cluster. */
export const modes = [
  { label: "single node", options: singleNode, cluster: false, routeBySlot: false },
  { label: "single node, routeBySlot", options: { ...singleNode, routeBySlot: true }, cluster: false, routeBySlot: true },
  { label: "cluster", options: cluster, cluster: true, routeBySlot: true }
] as const

export type Mode = (typeof modes)[number]

export type RawClient = Redis | Cluster

/** The script a call names: by SHA (`EVALSHA`) or by its function in the library (`FCALL`). */
const scriptNamed = new Map(Scripts.all.flatMap(({ script }) => {
  const fn = Scripts.library.functionOf(script)
  return fn === undefined ? [[script.sha, script]] : [[script.sha, script], [fn, script]]
}))

/** A script call as a spy sees it: which script, its keys and its arguments. */
export interface ScriptCall {
  readonly script: Scripts.Script
  readonly keys: ReadonlyArray<string>
  readonly args: ReadonlyArray<unknown>
}

/**
 * Spies on the scripts `client` sends, however they go (`EVALSHA` or, by default, `FCALL` of the
 * library): `spy` sees each call before it is sent and may answer it instead (a rejected promise), as a
 * server would; `undefined` sends it.
 */
export const spyScripts = (client: RawClient, spy: (call: ScriptCall) => Promise<unknown> | undefined): void => {
  const methods = client as unknown as Record<"evalsha" | "fcall", (...raw: Array<unknown>) => unknown>
  for (const method of ["evalsha", "fcall"] as const) {
    const original = methods[method]
    const spying = (...raw: Array<unknown>): unknown => {
      const script = scriptNamed.get(String(raw[0]))
      if (script !== undefined) {
        const numKeys = Number(raw[1])
        const answer = spy({ script, keys: raw.slice(2, 2 + numKeys).map(String), args: raw.slice(2 + numKeys) })
        if (answer !== undefined) return answer
      }
      return Reflect.apply(original, client, raw)
    }
    methods[method] = spying
  }
}

/** A plain ioredis client on the mode's server(s), closed with the scope. */
export const rawClient = (clusterMode: boolean, port = 6379): Effect.Effect<RawClient, never, Scope.Scope> =>
  Effect.acquireRelease(
    Effect.sync((): RawClient => clusterMode ? new Cluster(clusterNodes) : new Redis(port, "127.0.0.1")),
    (client) => Effect.promise(() => client.quit().catch(() => client.disconnect()))
  )

/** A unique name for a lease or group (`redis-test.<hex>.<label>`). */
export const uniqueName = (label: string): string => `redis-test.${randomBytes(8).toString("hex")}.${label}`

/** The server's clock (`TIME`) in epoch milliseconds. */
export const serverTime = (client: RawClient): Effect.Effect<number> =>
  Effect.promise(() => client.time()).pipe(Effect.map(([s, us]) => Number(s) * 1000 + Math.floor(Number(us) / 1000)))

/** A TCP port nothing listens on right now. */
export const freePort: Effect.Effect<number> = Effect.promise(supportFreePort)

/** A private `redis-server` process on `port`, killed (by its pid) when the scope closes. */
export interface PrivateServer {
  readonly port: number
  readonly kill: Effect.Effect<void>
  readonly start: Effect.Effect<void>
}

/** A private server (test/support/redisServer.ts) as a scoped resource. */
export const privateServer = (
  extraArgs: ReadonlyArray<string> = []
): Effect.Effect<PrivateServer, never, Scope.Scope> =>
  Effect.map(
    Effect.acquireRelease(Effect.promise(() => startPrivateRedis(extraArgs)), (server) => Effect.promise(server.stop)),
    asPrivateServer
  )

const asPrivateServer = (server: PrivateRedis): PrivateServer => ({
  port: server.port,
  kill: Effect.promise(server.kill),
  start: Effect.orDie(Effect.tryPromise(() => server.start()))
})

/** Hints received by a backend since `watchHints`, and a way to wait for some. */
export interface HintWatch {
  readonly seen: Effect.Effect<ReadonlyArray<Hint>>
  readonly await: (predicate: (hint: Hint) => boolean, timeout?: Duration.DurationInput) => Effect.Effect<void, Error>
  /** Waits (at most `timeout`, default 5 s) until the hints received so far satisfy `predicate`. */
  readonly awaitSeen: (
    predicate: (hints: ReadonlyArray<Hint>) => boolean,
    timeout?: Duration.DurationInput
  ) => Effect.Effect<void, Error>
}

/**
 * Collects `backend.hints` for the rest of the scope. Returns once the subscription is proven live:
 * a raw client publishes `joined` on a warm-up group channel (heard by pattern; a lease channel is
 * heard only while a session waits for the lease) until its hint comes back.
 */
export const watchHints = (
  backend: LeaseBackendService,
  raw: RawClient,
  prefix = "simba"
): Effect.Effect<HintWatch, Error, Scope.Scope> =>
  Effect.gen(function*() {
    const received = yield* SubscriptionRef.make<ReadonlyArray<Hint>>([])
    yield* backend.hints.pipe(
      Stream.runForEach((hint) => SubscriptionRef.update(received, (hints) => [...hints, hint])),
      Effect.forkScoped
    )
    const waitSeen = (predicate: (hints: ReadonlyArray<Hint>) => boolean, timeout: Duration.DurationInput) =>
      received.changes.pipe(
        Stream.filter(predicate),
        Stream.take(1),
        Stream.runDrain,
        Effect.timeoutFail({
          duration: timeout,
          onTimeout: () => new Error(`no matching hint within ${Duration.format(Duration.decode(timeout))}`)
        })
      )
    const wait = (predicate: (hint: Hint) => boolean, timeout: Duration.DurationInput = "5 seconds") =>
      waitSeen((hints) => hints.some(predicate), timeout)
    const warmUp = uniqueName("warm-up")
    yield* Effect.promise(() => raw.publish(RedisBackend.keys(prefix).group(warmUp), "joined")).pipe(
      Effect.zipRight(wait((hint) => hint._tag === "GroupChanged" && hint.group === warmUp, "200 millis")),
      Effect.retry(Schedule.recurs(25))
    )
    return {
      seen: SubscriptionRef.get(received),
      await: wait,
      awaitSeen: (predicate, timeout = "5 seconds") => waitSeen(predicate, timeout)
    }
  })

/**
 * Makes a new session of `backend` wait for `name` (held by another session), so that the backend
 * hears the lease's channel (a lease channel is subscribed only while a session waits), and returns
 * once it does: the plain `Released` the backend emits on confirming the subscription. Gives the
 * waiting session, and how many hints were seen by then (for `awaitFreed`).
 */
export const awaitWaiting = (
  backend: LeaseBackendService,
  watch: HintWatch,
  name: string,
  ttl: Duration.DurationInput,
  timeout: Duration.DurationInput = "5 seconds"
): Effect.Effect<{ readonly waiter: string; readonly seen: number }, Error> =>
  Effect.gen(function*() {
    const { sessionId } = yield* Effect.orDie(backend.openSession(Duration.decode(ttl)))
    const reply = yield* Effect.orDie(backend.acquire(sessionId, name))
    if (reply._tag !== "HeldBy") return yield* Effect.fail(new Error(`expected HeldBy, got ${reply._tag}`))
    yield* watch.await(waitHintOf(name), timeout)
    return { waiter: sessionId, seen: (yield* watch.seen).length }
  })

/** Waits until a hint received after the first `seen` says that `name` was freed. */
export const awaitFreed = (
  watch: HintWatch,
  name: string,
  seen: number,
  timeout?: Duration.DurationInput
): Effect.Effect<void, Error> => watch.awaitSeen((hints) => hints.slice(seen).some(freedOf(name)), timeout)

/**
 * The backend hears a release of `name`: a session takes it, another waits for it (`awaitWaiting`),
 * the first releases it, and a hint saying so comes after the waiter's. Both sessions are closed.
 */
export const releaseHeard = (
  backend: LeaseBackendService,
  watch: HintWatch,
  name: string,
  ttl: Duration.DurationInput,
  timeout?: Duration.DurationInput
): Effect.Effect<void, Error> =>
  Effect.gen(function*() {
    const { sessionId: holder } = yield* Effect.orDie(backend.openSession(Duration.decode(ttl)))
    const taken = yield* Effect.orDie(backend.acquire(holder, name))
    if (taken._tag !== "Granted") return yield* Effect.fail(new Error(`expected Granted, got ${taken._tag}`))
    const { seen, waiter } = yield* awaitWaiting(backend, watch, name, ttl, timeout)
    yield* Effect.orDie(backend.release(holder, name, taken.token))
    yield* awaitFreed(watch, name, seen, timeout)
    yield* Effect.orDie(Effect.forEach([holder, waiter], (sessionId) => backend.closeSession(sessionId), { discard: true }))
  })

export { freedOf }

/**
 * A private Redis Cluster of `size` masters (no replicas), stopped with the scope; see
 * `startPrivateCluster`.
 */
export const privateCluster = (size: number): Effect.Effect<ReadonlyArray<PrivateServer>, Error, Scope.Scope> =>
  Effect.map(
    Effect.acquireRelease(
      Effect.tryPromise({ try: () => startPrivateCluster(size), catch: (error) => error instanceof Error ? error : new Error(String(error)) }),
      (servers) => Effect.promise(() => Promise.all(servers.map((server) => server.stop())))
    ),
    (servers) => servers.map(asPrivateServer)
  )

/** The id (`CLIENT LIST`) of each connection named exactly `name` on the server `admin` is connected to. */
export const clientIds = (admin: Redis, name: string, command?: string): Effect.Effect<ReadonlyArray<string>> =>
  Effect.promise(() => admin.call("CLIENT", "LIST") as Promise<string>).pipe(
    Effect.map((list) =>
      list.split("\n").filter((line) =>
        line.includes(` name=${name} `) && (command === undefined || line.includes(` cmd=${command} `))
      ).map((line) => /(?:^|\s)id=(\d+)/.exec(line)![1]!)
    )
  )
