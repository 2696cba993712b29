/**
 * The Redis backend (ioredis 5): single node, or Redis Cluster through ioredis `Cluster`. This module
 * is the entry (`make`, `layer`, `layerConfig`, `makeWithClient`, `layerWithClient`, `config`); the
 * folder holds one module per concern (options, keys, slots, scripts, replies, connection, eviction,
 * markers, hints, watches, operations, inspect), and ioredis is an optional peer loaded when `make` runs.
 *
 * Every state change is one Lua script that decides with the server's clock (`TIME`, `PX`), so the
 * client's clock is never compared with the server's and a renewal is one script per node whatever
 * the number of leases. The wire contract (modes, keys, scripts, channels, the waiter queue, renewal
 * versions, Redis Cluster shadows, tokens, the lock-delay, failure behaviour) is in docs/design.md,
 * "Redis".
 */
import * as Config from "effect/Config"
import type * as ConfigError from "effect/ConfigError"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Runtime from "effect/Runtime"
import type * as Scope from "effect/Scope"
import { SimbaConfigError } from "../../Errors.js"
import * as LeaseBackend from "../../LeaseBackend.js"
import * as Connection from "./connection.js"
import * as Hints from "./hints.js"
import * as Inspect from "./inspect.js"
import * as Markers from "./markers.js"
import { isSessionId } from "../../internal/sessionId.js"
import { keys } from "./keys.js"
import * as Operations from "./operations.js"
import * as Scripts from "./scripts.js"
import * as Eviction from "./eviction.js"
import type { EvictionPolicyError } from "./eviction.js"
import {
  type BackendSettings,
  type RedisClientOptions,
  type RedisOptions,
  resolve,
  resolveBackend
} from "./options.js"
import { slotTag } from "./slots.js"

export { keys } from "./keys.js"
export type { Client } from "./connection.js"
export { EvictionPolicyError } from "./eviction.js"
export { config, type Mode, type RedisClientOptions, type RedisClusterNode, type RedisOptions } from "./options.js"
export { reservationMillis } from "./scripts.js"
export { keySlot, slotTag } from "./slots.js"

/** Everything after the command connection is ready: the eviction check, the subscriber, the operations. */
const start = (
  client: Connection.Client,
  settings: BackendSettings,
  owned: boolean
): Effect.Effect<LeaseBackend.LeaseBackendService, LeaseBackend.BackendError | EvictionPolicyError, Scope.Scope> =>
  Effect.gen(function*() {
    const k = keys(settings.prefix)
    // Build the slot tag table now rather than during the first acquire.
    if (settings.mode === "cluster") slotTag(0)
    const runFork = Runtime.runFork(yield* Effect.runtime<never>())
    const logError = (connection: string) => (error: Error) =>
      runFork(Effect.logDebug(`simba redis: ${connection} connection error: ${error.message}`))
    const tracker = yield* Connection.tracker(
      client,
      settings.commandTimeout,
      owned ? (reason) => runFork(Effect.logWarning(`simba redis: command connection: ${reason}`)) : undefined
    )
    yield* Eviction.check(client, tracker, settings.allowEvictionPolicy)
    const subscriber = yield* Connection.subscriber(settings, client, logError("subscriber"))
    const { delayMs, idleMs, mode } = settings
    const { hints, watches } = yield* Hints.make(
      mode,
      k,
      subscriber,
      (error) => runFork(Effect.logDebug("simba redis: subscriber: (un)subscribing a channel failed", error))
    )
    const library = settings.functions ? yield* Connection.loadLibrary(client, tracker, Scripts.library) : undefined
    const runner = Connection.runner(client, tracker, library)
    yield* Markers.markOnStart(mode, k, runner, client, delayMs)
    return LeaseBackend.make({
      backend: "redis",
      // Semaphores and read locks (scripts/pools.ts); in a cluster a hold's hash lies in its pool's slot.
      holds: true,
      isSessionId,
      hints,
      ...Operations.make(mode, k, runner, watches, {
        idleMs,
        delayMs,
        markAll: Markers.markAll(mode, k, runner, client, delayMs),
        // One server (routeBySlot): every slot is on it.
        nodeOf: (slot) => "slots" in client ? client.slots[slot]?.[0] : "server",
        refreshSlots: "slots" in client
          ? Effect.async<void>((resume) => client.refreshSlotsCache(() => resume(Effect.void)))
          : Effect.void,
        fork: (effect) => void runFork(effect)
      }),
      inspect: Inspect.make(client, tracker, settings.prefix, k)
    })
  })

/** What `make` and `makeWithClient` build: the backend in a scope, or why it could not start. */
type Made = Effect.Effect<
  LeaseBackend.LeaseBackendService,
  LeaseBackend.BackendError | SimbaConfigError | EvictionPolicyError,
  Scope.Scope
>

/**
 * A `LeaseBackendService` on Redis, with its command and subscriber connections in the scope. Fails
 * with `SimbaConfigError` when an option is invalid, with `EvictionPolicyError` when a server's
 * `maxmemory-policy` is not `noeviction` (see `RedisOptions.allowEvictionPolicy`), and with
 * `BackendError` when ioredis is not installed or Redis cannot be reached.
 */
export const make = (
  options: RedisOptions
): Made =>
  Effect.gen(function*() {
    const settings = yield* resolve(options)
    const driver = yield* Connection.loadIORedis
    const runFork = Runtime.runFork(yield* Effect.runtime<never>())
    const client = yield* Connection.connect(
      settings,
      () => Connection.newClient(driver, settings),
      (error) => runFork(Effect.logDebug(`simba redis: command connection error: ${error.message}`))
    )
    return yield* start(client, settings, true)
  })

/**
 * A `LeaseBackendService` on an ioredis client (`Redis` or `Cluster`) you made: its commands go over
 * that connection, and a duplicate of it (`client.duplicate()`, named `<connectionName>:hints`) is the
 * subscriber. Simba never closes your client: you close it, after the scope that uses the backend;
 * the duplicate is Simba's and closes with the scope. A client never connected (`lazyConnect`) is
 * connected; a closed one fails with `BackendError`.
 *
 * The client keeps its own options; the backend fails a call at once when the connection is not
 * ready (never into the offline queue) or closes while the call is in flight, and after
 * `commandTimeout`; a timeout does not close your client's connection (the backend's own connections
 * are reconnected after one, see "Failure behaviour"). The client must not have an ioredis `keyPrefix`
 * (use `keyPrefix` here): the pub/sub channels are named like the keys and would no longer match them.
 */
export const makeWithClient = (
  client: Connection.Client,
  options: RedisClientOptions = {}
): Made =>
  Effect.gen(function*() {
    const cluster = Connection.isCluster(client)
    const settings = yield* resolveBackend(options, cluster)
    const clientPrefix = cluster ? client.options.redisOptions?.keyPrefix : client.options.keyPrefix
    if (clientPrefix !== undefined && clientPrefix !== "") {
      return yield* new SimbaConfigError({
        field: "redis.client",
        rule: "must have no ioredis keyPrefix (pub/sub channels are not prefixed): pass keyPrefix to Simba instead"
      })
    }
    yield* Connection.awaitReady(client, settings.connectTimeout)
    return yield* start(client, settings, false)
  })

/** The Redis backend as a layer; both connections are closed when the layer's scope closes. */
export const layer = (
  options: RedisOptions
): Layer.Layer<LeaseBackend.LeaseBackend, LeaseBackend.BackendError | SimbaConfigError | EvictionPolicyError> =>
  Layer.scoped(LeaseBackend.LeaseBackend, make(options))

/**
 * The Redis backend on an ioredis client you made (see `makeWithClient`): Simba never closes it; the
 * subscriber connection it duplicates closes with the layer.
 */
export const layerWithClient = (
  client: Connection.Client,
  options: RedisClientOptions = {}
): Layer.Layer<LeaseBackend.LeaseBackend, LeaseBackend.BackendError | SimbaConfigError | EvictionPolicyError> =>
  Layer.scoped(LeaseBackend.LeaseBackend, makeWithClient(client, options))

/** The Redis backend with its options read from `Config` (for example `config`, from the environment). */
export const layerConfig = (
  options: Config.Config.Wrap<RedisOptions>
): Layer.Layer<
  LeaseBackend.LeaseBackend,
  LeaseBackend.BackendError | SimbaConfigError | EvictionPolicyError | ConfigError.ConfigError
> => Layer.scoped(LeaseBackend.LeaseBackend, Effect.flatMap(Config.unwrap(options), make))
