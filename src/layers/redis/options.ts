/**
 * The Redis backend's options: what a user passes (`RedisOptions`), what the environment gives
 * (`config`), and their validation into the settings the connections and scripts use. An invalid
 * option fails with `SimbaConfigError { field: "redis.<option>", rule }`, before any connection.
 */
import * as Config from "effect/Config"
import * as ConfigError from "effect/ConfigError"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Either from "effect/Either"
import * as Option from "effect/Option"
import * as Redacted from "effect/Redacted"
import type { ClusterOptions, RedisOptions as IORedisOptions } from "ioredis"
import type { ConnectionOptions as TlsConnectionOptions } from "node:tls"
import { SimbaConfigError } from "../../Errors.js"
import { parseDuration } from "../../SimbaConfig.js"
import { defaultPrefix } from "./keys.js"

/** A Redis Cluster node to start from. */
export interface RedisClusterNode {
  readonly host: string
  readonly port: number
}

/** How to reach Redis. Fields given explicitly win over the same part of `url`. */
export interface RedisOptions {
  /** `redis://[user[:password]@]host[:port][/db]`, or `rediss://` for TLS. */
  readonly url?: Redacted.Redacted | string | undefined
  readonly host?: string | undefined
  readonly port?: number | undefined
  readonly username?: string | undefined
  readonly password?: Redacted.Redacted | undefined
  /** `true` for TLS with Node's defaults, or Node `tls` options. */
  readonly tls?: boolean | TlsConnectionOptions | undefined
  /** Database number (single node only). */
  readonly db?: number | undefined
  /** First part of every key and channel, `[A-Za-z0-9._:-]+`. Default `simba`. */
  readonly keyPrefix?: string | undefined
  /** Use a Redis Cluster (ioredis `Cluster`) started from these nodes; `url` then gives only credentials and TLS. */
  readonly cluster?: { readonly nodes: ReadonlyArray<RedisClusterNode> } | undefined
  /**
   * Keep every script call inside one hash slot (per-slot session shadows, docs/design.md).
   * Required by Redis Cluster. Default: `true` with `cluster`, `false` otherwise.
   */
  readonly routeBySlot?: boolean | undefined
  /** Time allowed to connect (both connections). Default 10 seconds. */
  readonly connectTimeout?: Duration.DurationInput | undefined
  /** Time after which a command fails. Default 5 seconds. */
  readonly commandTimeout?: Duration.DurationInput | undefined
  /**
   * `CLIENT SETNAME` of the command connection (printable ASCII without spaces); the subscriber gets
   * `<name>:hints`. Default `simba`.
   */
  readonly connectionName?: string | undefined
  /**
   * Further ioredis options for every connection (for example `family`, `keepAlive`). Applied under
   * the ones above and under those this backend relies on (`lazyConnect`, `enableOfflineQueue`,
   * `autoResendUnfulfilledCommands`, `commandTimeout`), which always win.
   */
  readonly redisOptions?: IORedisOptions | undefined
  /** Further ioredis `Cluster` options (for example `natMap`, `dnsLookup`, `slotsRefreshTimeout`), applied the same way. */
  readonly clusterOptions?: ClusterOptions | undefined
  /**
   * Start even though a server's `maxmemory-policy` is not `noeviction`, or cannot be read. Default
   * `false`: the backend then refuses to start with `EvictionPolicyError`. What can go wrong when set:
   * under memory pressure Redis may evict the session keys (every `volatile-*` policy picks exactly
   * them, they carry `PX`) and, with `allkeys-*`, the lease hashes and queues: a holder's lease is then
   * free on the server while its client still believes it holds it (two leaders at once), and an
   * evicted lease hash restarts its fencing tokens from 1. Set it only when the policy really is
   * `noeviction` but cannot be read (`CONFIG GET` and `INFO` both refused), or memory can never run out.
   */
  readonly allowEvictionPolicy?: boolean | undefined
  /**
   * How long a lease's hash stays after its last release (or a takeover) when nobody takes the lease
   * again; a grant makes it persistent until the next release. Default 1 hour. Tokens do not depend
   * on it (a new token is at least the server's `TIME` in microseconds), as long as the server's
   * clock never steps back by more than this: keep it far above any lease duration and any clock step.
   */
  readonly idleExpiry?: Duration.DurationInput | undefined
  /**
   * The lock-delay: when the backend finds the store's state lost (its boot marker missing: a restart
   * without persistence, a flush, a fail-over to a replica that lacks it), it grants nothing for this
   * long, so every session that could still believe it holds a lease has passed its deadline first.
   * Set it >= the longest `leaseDuration` any client uses on this Redis. Default 15 seconds (the
   * default lease duration). `0` turns it off: only for a store that cannot lose its state.
   */
  readonly lockDelay?: Duration.DurationInput | undefined
}

/**
 * The options of a backend built on a client you bring (`RedisBackend.makeWithClient`): the client
 * gives the connection; these the keys, the timeouts and the subscriber's name.
 */
export type RedisClientOptions = Pick<
  RedisOptions,
  "keyPrefix" | "routeBySlot" | "connectTimeout" | "commandTimeout" | "connectionName" | "allowEvictionPolicy"
  | "idleExpiry" | "lockDelay"
>

/**
 * How the scripts find a session's state (docs/design.md, "Redis", "Modes"):
 * - `node`: every key on one server; a call touches the session's keys and a lease's in one script;
 * - `cluster`: every call inside one hash slot (`routeBySlot`), through per-slot session shadows.
 */
export type Mode = "node" | "cluster"

/** What every Redis backend needs, however its command connection was made. */
export interface BackendSettings {
  readonly prefix: string
  readonly mode: Mode
  readonly connectTimeout: number
  /** Milliseconds after which a call fails (also enforced by the backend, for a client you bring). */
  readonly commandTimeout: number
  /** The command connection's name (of a client you bring: only the base of the subscriber's name). */
  readonly connectionName: string
  readonly allowEvictionPolicy: boolean
  /** Ms a freed lease hash lives without a grant. */
  readonly idleMs: number
  /** Ms nothing is granted after the state was found lost (`lockDelay`). */
  readonly delayMs: number
}

/** The options, checked and filled in with their defaults. */
export interface Settings extends BackendSettings {
  /** ioredis options of each connection (of each node's, in a cluster). */
  readonly redisOptions: IORedisOptions
  /** The nodes to start from, for a Redis Cluster; `undefined` for a single server. */
  readonly cluster: ReadonlyArray<RedisClusterNode> | undefined
  readonly clusterOptions: ClusterOptions | undefined
}

/**
 * Options read from the environment: `SIMBA_REDIS_URL` (default `redis://127.0.0.1:6379`),
 * `SIMBA_REDIS_CLUSTER` (optional, `host:port,host:port,...`: use a cluster; the URL then only gives
 * credentials and TLS), `SIMBA_REDIS_KEY_PREFIX` (default `simba`) and
 * `SIMBA_REDIS_ALLOW_EVICTION_POLICY` (default `false`, see `RedisOptions.allowEvictionPolicy`).
 */
export const config: Config.Config<RedisOptions> = Config.all({
  url: Config.redacted("SIMBA_REDIS_URL").pipe(Config.withDefault(Redacted.make("redis://127.0.0.1:6379"))),
  cluster: Config.string("SIMBA_REDIS_CLUSTER").pipe(
    Config.mapOrFail((text) => {
      const nodes: Array<RedisClusterNode> = []
      for (const part of text.split(",").map((s) => s.trim()).filter((s) => s.length > 0)) {
        const match = /^(.+):(\d{1,5})$/.exec(part)
        const port = match === null ? NaN : Number(match[2])
        if (match === null || !isPort(port)) {
          return Either.left(ConfigError.InvalidData([], `expected host:port, got ${JSON.stringify(part)}`))
        }
        nodes.push({ host: match[1]!, port })
      }
      return nodes.length === 0
        ? Either.left(ConfigError.InvalidData([], "expected at least one host:port"))
        : Either.right<{ readonly nodes: ReadonlyArray<RedisClusterNode> }>({ nodes })
    }),
    Config.option,
    Config.map(Option.getOrUndefined)
  ),
  keyPrefix: Config.string("SIMBA_REDIS_KEY_PREFIX").pipe(Config.withDefault(defaultPrefix)),
  allowEvictionPolicy: Config.boolean("SIMBA_REDIS_ALLOW_EVICTION_POLICY").pipe(Config.withDefault(false)),
  lockDelay: Config.duration("SIMBA_REDIS_LOCK_DELAY").pipe(Config.option, Config.map(Option.getOrUndefined))
})

const prefixPattern = /^[A-Za-z0-9._:-]+$/
// What Redis accepts in `CLIENT SETNAME`.
const connectionNamePattern = /^[!-~]+$/

const isPort = (port: number) => Number.isInteger(port) && port >= 1 && port <= 65535

const invalid = (option: string, rule: string) => Effect.fail(new SimbaConfigError({ field: `redis.${option}`, rule }))

const millis = (
  option: string,
  input: Duration.DurationInput | undefined,
  fallback: number,
  least: 0 | 1 = 1
): Effect.Effect<number, SimbaConfigError> => {
  if (input === undefined) return Effect.succeed(fallback)
  // Text as SimbaConfig reads it (`8s`, `500ms`, `15 seconds`), so every duration option takes the same forms.
  if (typeof input === "string") {
    const parsed = parseDuration(input)
    if (Either.isLeft(parsed)) return invalid(option, parsed.left)
  }
  const decoded = typeof input === "string"
    ? Option.map(Either.getRight(parseDuration(input)), Duration.millis)
    : Duration.decodeUnknown(input)
  const ms = Option.isSome(decoded) ? Duration.toMillis(decoded.value) : NaN
  return Number.isFinite(ms) && ms >= least
    ? Effect.succeed(Math.ceil(ms))
    : invalid(option, `must be a finite duration of at least ${least} ms`)
}

/** The parts of a `redis://` URL that are given. */
interface FromUrl {
  readonly host?: string
  readonly port?: number
  readonly username?: string
  readonly password?: string
  readonly db?: number
  readonly tls?: boolean
}

const parseUrl = (url: Redacted.Redacted | string | undefined): Effect.Effect<FromUrl, SimbaConfigError> => {
  if (url === undefined) return Effect.succeed({})
  const text = typeof url === "string" ? url : Redacted.value(url)
  let parsed: URL
  try {
    parsed = new URL(text)
  } catch {
    return invalid("url", "must be a valid URL") // the URL may hold a password: never echo it
  }
  if (parsed.protocol !== "redis:" && parsed.protocol !== "rediss:") {
    return invalid("url", `must start with redis:// or rediss:// (got ${parsed.protocol}//)`)
  }
  const dbText = parsed.pathname.replace(/^\//, "")
  if (dbText !== "" && !/^\d+$/.test(dbText)) return invalid("url", "its path must be a database number")
  return Effect.succeed({
    ...(parsed.hostname !== "" ? { host: parsed.hostname.replace(/^\[(.*)\]$/, "$1") } : {}),
    ...(parsed.port !== "" ? { port: Number(parsed.port) } : {}),
    ...(parsed.username !== "" ? { username: decodeURIComponent(parsed.username) } : {}),
    ...(parsed.password !== "" ? { password: decodeURIComponent(parsed.password) } : {}),
    ...(dbText !== "" ? { db: Number(dbText) } : {}),
    ...(parsed.protocol === "rediss:" ? { tls: true } : {})
  })
}

/**
 * Checks the options every backend has (`RedisClientOptions`) and fills in their defaults; `cluster`
 * says whether the command connection is a Redis Cluster.
 */
export const resolveBackend = (
  options: RedisClientOptions,
  cluster: boolean
): Effect.Effect<BackendSettings, SimbaConfigError> =>
  Effect.gen(function*() {
    const prefix = options.keyPrefix ?? defaultPrefix
    if (typeof prefix !== "string" || !prefixPattern.test(prefix)) {
      return yield* invalid("keyPrefix", "may contain only the characters [A-Za-z0-9._:-]")
    }
    const connectTimeout = yield* millis("connectTimeout", options.connectTimeout, 10_000)
    const commandTimeout = yield* millis("commandTimeout", options.commandTimeout, 5_000)
    const connectionName = options.connectionName ?? "simba"
    if (typeof connectionName !== "string" || !connectionNamePattern.test(connectionName)) {
      return yield* invalid("connectionName", "must be printable ASCII characters without spaces, at least one")
    }
    const routeBySlot = options.routeBySlot ?? cluster
    if (typeof routeBySlot !== "boolean") return yield* invalid("routeBySlot", "must be true or false")
    if (cluster && !routeBySlot) {
      return yield* invalid("routeBySlot", "must be true with a cluster (a script may touch one hash slot only)")
    }
    const allowEvictionPolicy = options.allowEvictionPolicy ?? false
    if (typeof allowEvictionPolicy !== "boolean") return yield* invalid("allowEvictionPolicy", "must be true or false")
    const idleMs = yield* millis("idleExpiry", options.idleExpiry, 3_600_000)
    const delayMs = options.lockDelay === undefined ? 15_000 : yield* millis("lockDelay", options.lockDelay, 0, 0)
    return {
      prefix,
      mode: routeBySlot ? "cluster" : "node",
      connectTimeout,
      commandTimeout,
      connectionName,
      allowEvictionPolicy,
      idleMs,
      delayMs
    } satisfies BackendSettings
  })

/** Checks `options` and fills in the defaults; fails with `SimbaConfigError` naming the first invalid option. */
export const resolve = (options: RedisOptions): Effect.Effect<Settings, SimbaConfigError> =>
  Effect.gen(function*() {
    const fromUrl = yield* parseUrl(options.url)
    const port = options.port ?? fromUrl.port ?? 6379
    if (!isPort(port)) return yield* invalid("port", "must be an integer in 1..65535")
    const db = options.db ?? fromUrl.db ?? 0
    if (!Number.isInteger(db) || db < 0) return yield* invalid("db", "must be a non-negative integer")
    const tlsOption = options.tls ?? fromUrl.tls ?? false
    const tls = tlsOption === true ? {} : tlsOption === false ? undefined : tlsOption
    const password = options.password !== undefined ? Redacted.value(options.password) : fromUrl.password
    const username = options.username ?? fromUrl.username
    const cluster = options.cluster?.nodes
    if (cluster !== undefined) {
      if (cluster.length === 0) return yield* invalid("cluster.nodes", "must not be empty")
      if (!cluster.every((node) => node.host !== "" && isPort(node.port))) {
        return yield* invalid("cluster.nodes", "each node needs a host and a port in 1..65535")
      }
      if (db !== 0) return yield* invalid("db", "must be 0 with a cluster")
    }
    const backend = yield* resolveBackend(options, cluster !== undefined)
    const { commandTimeout, connectTimeout, connectionName } = backend
    const redisOptions: IORedisOptions = {
      ...options.redisOptions,
      host: options.host ?? fromUrl.host ?? "127.0.0.1",
      port,
      db,
      ...(username !== undefined ? { username } : {}),
      ...(password !== undefined ? { password } : {}),
      ...(tls !== undefined ? { tls } : {}),
      connectionName,
      connectTimeout,
      commandTimeout,
      lazyConnect: true,
      // Fail fast while disconnected and never replay a command later: the engine retries.
      enableOfflineQueue: false,
      autoResendUnfulfilledCommands: false,
      // A primary that became a replica (failover) answers READONLY: reconnect, do not resend.
      reconnectOnError: (error) => error.message.startsWith("READONLY") ? 1 : false
    }
    return {
      ...backend,
      redisOptions,
      cluster,
      clusterOptions: options.clusterOptions
    }
  })
