/**
 * The Redis backend's options: what a user passes (`RedisOptions`), what the environment gives
 * (`config`), and their validation into the settings the connections and scripts use. An invalid
 * option fails with `SimbaConfigError { field: "redis.<option>", value, rule }` (and `variable`,
 * when it was read from the environment), before any connection.
 */
import type * as Config from "effect/Config"
import * as Effect from "effect/Effect"
import * as Either from "effect/Either"
import * as Redacted from "effect/Redacted"
import type { ClusterOptions, RedisOptions as IORedisOptions } from "ioredis"
import type { ConnectionOptions as TlsConnectionOptions } from "node:tls"
import type { SimbaConfigError } from "../../Errors.js"
import * as Options from "../../internal/options.js"
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
  readonly connectTimeout?: Options.DurationOption | undefined
  /** Time after which a command fails. Default 5 seconds. */
  readonly commandTimeout?: Options.DurationOption | undefined
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
   * Load the scripts as one Redis function library (`FUNCTION LOAD`, on every master) and call them
   * with `FCALL`. Default `true`; used only where every server takes the library (Redis 7 or later, and
   * an ACL user allowed `FUNCTION LOAD`), otherwise the scripts go by SHA (`EVALSHA`) as with `false`.
   * A function runs only its script's own code, where a script defines its helpers again on every call:
   * about a quarter less server time per lock (docs/redis.md, "Scripts as functions").
   */
  readonly functions?: boolean | undefined
  /**
   * How long a lease's hash stays after its last release (or a takeover) when nobody takes the lease
   * again; a grant makes it persistent until the next release. Default 1 hour. Tokens do not depend
   * on it (a new token is at least the server's `TIME` in microseconds), as long as the server's
   * clock never steps back by more than this: keep it far above any lease duration and any clock step.
   */
  readonly idleExpiry?: Options.DurationOption | undefined
  /**
   * The lock-delay: when the backend finds the store's state lost (its boot marker missing: a restart
   * without persistence, a flush, a fail-over to a replica that lacks it), it grants nothing for this
   * long, so every session that could still believe it holds a lease has passed its deadline first.
   * Set it >= the longest `leaseDuration` any client uses on this Redis. Default 15 seconds (the
   * default lease duration). `0` turns it off: only for a store that cannot lose its state.
   */
  readonly lockDelay?: Options.DurationOption | undefined
}

/**
 * The options of a backend built on a client you bring (`RedisBackend.makeWithClient`): the client
 * gives the connection; these the keys, the timeouts and the subscriber's name.
 */
export type RedisClientOptions = Pick<
  RedisOptions,
  "keyPrefix" | "routeBySlot" | "connectTimeout" | "commandTimeout" | "connectionName" | "allowEvictionPolicy"
  | "functions" | "idleExpiry" | "lockDelay"
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
  /** Whether to load the scripts' function library (`RedisOptions.functions`). */
  readonly functions: boolean
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
 * credentials and TLS), `SIMBA_REDIS_KEY_PREFIX` (default `simba`),
 * `SIMBA_REDIS_ALLOW_EVICTION_POLICY` (default `false`, see `RedisOptions.allowEvictionPolicy`),
 * `SIMBA_REDIS_FUNCTIONS` (default `true`, see `RedisOptions.functions`) and
 * `SIMBA_REDIS_LOCK_DELAY` (a duration such as `15s`, see `RedisOptions.lockDelay`). An unset
 * variable leaves its option to the default; a malformed or invalid one fails the backend's start
 * with a `SimbaConfigError` naming the variable, its value (a URL's password hidden) and the rule.
 */
export const config: Config.Config<RedisOptions> = Options.fromEnv({
  url: Options.secret("SIMBA_REDIS_URL"),
  cluster: Options.variable("SIMBA_REDIS_CLUSTER", (text) => Either.map(Options.parseHostPorts(text), (nodes) => ({ nodes }))),
  keyPrefix: Options.text("SIMBA_REDIS_KEY_PREFIX"),
  allowEvictionPolicy: Options.boolean("SIMBA_REDIS_ALLOW_EVICTION_POLICY"),
  functions: Options.boolean("SIMBA_REDIS_FUNCTIONS"),
  lockDelay: Options.duration("SIMBA_REDIS_LOCK_DELAY")
})

const prefixPattern = /^[A-Za-z0-9._:-]+$/
// What Redis accepts in `CLIENT SETNAME`.
const connectionNamePattern = /^[!-~]+$/

/** The parts of a `redis://` URL that are given. */
interface FromUrl {
  readonly host?: string
  readonly port?: number
  readonly username?: string
  readonly password?: string
  readonly db?: number
  readonly tls?: boolean
}

const parseUrl = (check: Options.Check, url: Redacted.Redacted | string | undefined): Effect.Effect<FromUrl, SimbaConfigError> => {
  if (url === undefined) return Effect.succeed({})
  const text = typeof url === "string" ? url : Redacted.value(url)
  const parsedUrl = Options.parseUrl(text, ["redis:", "rediss:"])
  // Shown with its password hidden (`Options.show`).
  if (Either.isLeft(parsedUrl)) return check.invalid("url", text, parsedUrl.left)
  const parsed = parsedUrl.right
  const dbText = parsed.pathname.replace(/^\//, "")
  if (dbText !== "" && !/^\d+$/.test(dbText)) return check.invalid("url", text, "its path must be a database number")
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
    const check = yield* Options.check("redis", options)
    // Whole milliseconds, rounded up (ioredis and `PX` take integers).
    const millis = (option: keyof RedisClientOptions, fallback: number, least: number) =>
      Effect.map(check.duration(option, options[option], fallback, { least }), Math.ceil)
    const prefix = options.keyPrefix ?? defaultPrefix
    if (typeof prefix !== "string" || !prefixPattern.test(prefix)) {
      return yield* check.invalid("keyPrefix", prefix, "may contain only the characters [A-Za-z0-9._:-], at least one")
    }
    const connectTimeout = yield* millis("connectTimeout", 10_000, 1)
    const commandTimeout = yield* millis("commandTimeout", 5_000, 1)
    const connectionName = options.connectionName ?? "simba"
    if (typeof connectionName !== "string" || !connectionNamePattern.test(connectionName)) {
      return yield* check.invalid("connectionName", connectionName, "must be printable ASCII characters without spaces, at least one")
    }
    const routeBySlot = yield* check.boolean("routeBySlot", options.routeBySlot, cluster)
    if (cluster && !routeBySlot) {
      return yield* check.invalid("routeBySlot", routeBySlot, "must be true with a cluster (a script may touch one hash slot only)")
    }
    const allowEvictionPolicy = yield* check.boolean("allowEvictionPolicy", options.allowEvictionPolicy, false)
    const functions = yield* check.boolean("functions", options.functions, true)
    const idleMs = yield* millis("idleExpiry", 3_600_000, 1)
    const delayMs = yield* millis("lockDelay", 15_000, 0)
    return {
      prefix,
      mode: routeBySlot ? "cluster" : "node",
      connectTimeout,
      commandTimeout,
      connectionName,
      allowEvictionPolicy,
      functions,
      idleMs,
      delayMs
    } satisfies BackendSettings
  })

/** Checks `options` and fills in the defaults; fails with `SimbaConfigError` naming the first invalid option. */
export const resolve = (options: RedisOptions): Effect.Effect<Settings, SimbaConfigError> =>
  Effect.gen(function*() {
    const check = yield* Options.check("redis", options)
    const fromUrl = yield* parseUrl(check, options.url)
    const port = yield* check.integer("port", options.port, fromUrl.port ?? 6379, { least: 1, most: 65535 })
    const db = yield* check.integer("db", options.db, fromUrl.db ?? 0, { least: 0 })
    const tlsOption = options.tls ?? fromUrl.tls ?? false
    const tls = tlsOption === true ? {} : tlsOption === false ? undefined : tlsOption
    const password = options.password !== undefined ? Redacted.value(options.password) : fromUrl.password
    const username = options.username ?? fromUrl.username
    const cluster = options.cluster?.nodes
    if (cluster !== undefined) {
      if (cluster.length === 0) return yield* check.invalid("cluster.nodes", cluster, "must not be empty")
      if (!cluster.every((node) => node.host !== "" && Options.isPort(node.port))) {
        return yield* check.invalid("cluster.nodes", cluster, "each node needs a host and a port in 1..65535")
      }
      if (db !== 0) return yield* check.invalid("db", db, "must be 0 with a cluster")
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
