/**
 * The connections to Redis: the driver (ioredis, loaded when a backend is built, never when the
 * library is imported), the command connection and its script runner, and the subscriber.
 */
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Either from "effect/Either"
import type * as Scope from "effect/Scope"
import type { Cluster, ClusterOptions, Redis } from "ioredis"
import { BackendError, loadDriver } from "../../LeaseBackend.js"
import type { Settings } from "./options.js"
import type { Call } from "./scripts.js"

/** What this backend uses of the ioredis module. */
export interface Driver {
  readonly Redis: typeof Redis
  readonly Cluster: typeof Cluster
}

/** A connection to one server, or to a cluster. */
export type Client = Redis | Cluster

export const backendError = (operation: string, cause: unknown) => new BackendError({ backend: "redis", operation, cause })

/** Loads ioredis; a missing package fails with a `BackendError` naming the install line. */
export const loadIORedis: Effect.Effect<Driver, BackendError> = loadDriver(
  "redis",
  "ioredis",
  "npm install ioredis@^5",
  () => import("ioredis")
)

/** The command connection of `settings`, not connected yet. */
export const newClient = (driver: Driver, settings: Settings): Client => {
  if (settings.cluster === undefined) return new driver.Redis(settings.redisOptions)
  const { db: _db, host: _host, port: _port, ...nodeOptions } = settings.redisOptions
  const clusterOptions: ClusterOptions = {
    ...settings.clusterOptions,
    lazyConnect: true,
    enableOfflineQueue: false,
    redisOptions: nodeOptions
  }
  return new driver.Cluster(settings.cluster.map((node) => ({ host: node.host, port: node.port })), clusterOptions)
}

/** The subscriber: the same options as `client`, its own connection(s), another name. */
export const duplicate = (driver: Driver, client: Client, connectionName: string): Client =>
  client instanceof driver.Cluster
    ? client.duplicate(undefined, { redisOptions: { ...client.options.redisOptions, connectionName } })
    : client.duplicate({ connectionName })

/**
 * ioredis attaches the failed command to a reply error (`error.command.args`): for `AUTH` and `HELLO`
 * those are credentials, so such an error is replaced by one carrying only its message.
 */
export const scrub = (cause: unknown): unknown => {
  if (!(cause instanceof Error) || !("command" in cause)) return cause
  const command: unknown = cause.command
  const name = typeof command === "object" && command !== null && "name" in command ? String(command.name) : ""
  if (!/^(auth|hello)$/i.test(name)) return cause
  const clean = new Error(cause.message)
  clean.name = cause.name
  return clean
}

/** Creates a connection in the scope (closed by a finalizer) and waits until it is ready. */
export const connect = (
  settings: Settings,
  create: () => Client,
  onError: (error: Error) => void
): Effect.Effect<Client, BackendError, Scope.Scope> =>
  Effect.gen(function*() {
    // ioredis rejects `connect()` with "Connection is closed." and reports the reason (refused,
    // WRONGPASS, ...) as an `error` event: keep the last one for the BackendError.
    let lastError: Error | undefined
    const client = yield* Effect.acquireRelease(
      Effect.sync(() => {
        const client = create()
        // Without a listener ioredis prints every error; failures reach callers as BackendError.
        client.on("error", (error: Error) => {
          lastError = error
          onError(error)
        })
        return client
      }),
      (client) =>
        Effect.tryPromise(() => client.quit()).pipe(
          Effect.timeout("1 second"),
          Effect.catchAllCause((cause) => Effect.logDebug("simba redis: QUIT failed, disconnecting", cause)),
          Effect.ensuring(Effect.sync(() => client.disconnect()))
        )
    )
    yield* Effect.tryPromise({
      try: () => client.connect(),
      catch: (cause) => backendError("connect", scrub(lastError ?? cause))
    }).pipe(
      Effect.timeoutFail({
        duration: Duration.millis(settings.connectTimeout),
        onTimeout: () =>
          backendError(
            "connect",
            lastError === undefined
              ? `not connected within ${settings.connectTimeout} ms`
              : `not connected within ${settings.connectTimeout} ms: ${lastError.message}`
          )
      })
    )
    return client
  })

/**
 * A subscriber connection (resubscribed by ioredis after a reconnect) listening to `patterns`; each
 * message goes to `onMessage`, synchronously and in order.
 */
export const subscribe = (
  driver: Driver,
  settings: Settings,
  client: Client,
  patterns: ReadonlyArray<string>,
  onMessage: (channel: string, message: string) => void,
  onError: (error: Error) => void
): Effect.Effect<void, BackendError, Scope.Scope> =>
  Effect.gen(function*() {
    const subscriber = yield* connect(
      settings,
      () => duplicate(driver, client, `${settings.connectionName}:hints`),
      onError
    )
    subscriber.on("pmessage", (_pattern: string, channel: string, message: string) => onMessage(channel, message))
    yield* Effect.tryPromise({
      try: () => subscriber.psubscribe(...patterns),
      catch: (cause) => backendError("subscribe", cause)
    })
  })

/** Runs script calls on a command connection. */
export interface Runner {
  /** Runs one script and decodes its reply. */
  readonly run: <A>(operation: string, call: Call<A>) => Effect.Effect<A, BackendError>
  /**
   * Runs several scripts at once (one per slot: ioredis sends them to their nodes without waiting)
   * as one effect, and decodes the replies; fails if any fails.
   */
  readonly runAll: <A>(operation: string, calls: ReadonlyArray<Call<A>>) => Effect.Effect<ReadonlyArray<A>, BackendError>
}

const isNoScript = (error: unknown): boolean => error instanceof Error && error.message.startsWith("NOSCRIPT")

/**
 * Script calls by SHA (`EVALSHA`); after `NOSCRIPT` (script cache flushed, failover) `EVAL` loads the
 * script again. Replies are decoded synchronously: the schemas have no effects, and the Effect-based
 * parser costs more than the round trip on a busy client.
 */
export const runner = (client: Client): Runner => {
  const send = ({ args, keys, script }: Call<unknown>): Promise<unknown> =>
    client.evalsha(script.sha, keys.length, ...keys, ...args).catch((error: unknown) =>
      isNoScript(error) ? client.eval(script.lua, keys.length, ...keys, ...args) : Promise.reject(error)
    )
  const decode = <A>(operation: string, call: Call<A>, raw: unknown): Effect.Effect<A, BackendError> =>
    Either.match(call.decode(raw), {
      onLeft: (error) => Effect.fail(backendError(operation, error)),
      onRight: Effect.succeed
    })
  const sent = <A>(operation: string, promise: () => Promise<A>) =>
    Effect.tryPromise({ try: promise, catch: (cause) => backendError(operation, scrub(cause)) })
  const run = <A>(operation: string, call: Call<A>): Effect.Effect<A, BackendError> =>
    sent(operation, () => send(call)).pipe(Effect.flatMap((raw) => decode(operation, call, raw)))
  const runAll = <A>(operation: string, calls: ReadonlyArray<Call<A>>): Effect.Effect<ReadonlyArray<A>, BackendError> =>
    calls.length === 0
        ? Effect.succeed([])
        : sent(operation, () => Promise.all(calls.map(send))).pipe(
          Effect.flatMap((raws) => {
            const replies: Array<A> = []
            for (let i = 0; i < calls.length; i++) {
              const reply = calls[i]!.decode(raws[i])
              if (Either.isLeft(reply)) return Effect.fail(backendError(operation, reply.left))
              replies.push(reply.right)
            }
            return Effect.succeed(replies)
          })
        )
  return { run, runAll }
}
