/**
 * The PostgreSQL backend (`@effect/sql-pg`, PostgreSQL 12+): `SqlBackend` with one PL/pgSQL function
 * per operation (`migrations.ts`), a FIFO waiter queue per lease (a release grants the lease to the
 * first live waiter in its own transaction) and hints by `pg_notify` on a dedicated `LISTEN`
 * connection (`listen.ts`), so a hand-over needs no poll. `@effect/sql-pg` is an optional peer, loaded
 * when a layer of this module is built. `make`/`layer`/`layerConfig` open a pool of their own;
 * `makeWithClient`/`layerWithClient` use a `SqlClient` the application owns (never inside one of its
 * transactions: the functions run their own). Tables, functions and channel: docs/design.md,
 * "PostgreSQL and MySQL/MariaDB".
 */
import type * as SqlClient from "@effect/sql/SqlClient"
import * as Config from "effect/Config"
import * as Context from "effect/Context"
import type * as ConfigError from "effect/ConfigError"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Redacted from "effect/Redacted"
import type * as Scope from "effect/Scope"
import * as Stream from "effect/Stream"
import type { SimbaConfigError } from "../../Errors.js"
import { BackendError, type Hint, LeaseBackend, type LeaseBackendService, loadDriver } from "../../LeaseBackend.js"
import * as Listen from "./listen.js"
import { channel, defaultPrefix } from "./migrations.js"
import * as Migrations from "./migrations.js"
import {
  type ClientOptions,
  lanesOf,
  type LockDelayOption,
  lockDelayOf,
  pgConfig,
  prefixOf,
  reservedOf,
  resolve,
  type SqlOptions
} from "./options.js"
import * as SqlBackend from "./SqlBackend.js"
import * as Waiting from "./waiting.js"

export type { ClientOptions, LockDelayOption } from "./options.js"

/** Options of `make` / `layer`: a pool of its own. */
export interface PgOptions extends SqlOptions, LockDelayOption {}

/**
 * The SQL the migration runs for `tablePrefix` (tables, indexes, routines), in order, for DBAs who
 * create the schema themselves (the migration then finds it installed and does nothing).
 */
export const migrationStatements = (tablePrefix: string = defaultPrefix): ReadonlyArray<string> =>
  Migrations.postgres(tablePrefix).statements

/** The backend name used in errors, metrics and spans. */
export const backend = "postgres"

export const defaultUrl = "postgres://127.0.0.1:5432/postgres"

const install = "npm install @effect/sql@^0.52 @effect/sql-pg@^0.53"

/** Options of `makeWithClient` / `layerWithClient`. */
export interface PgClientOptions extends ClientOptions, LockDelayOption {
  /**
   * Where the `LISTEN` connection for hints goes. Default: where the client connects (a `PgClient`'s
   * `config`: its `url`, or its host, port, database and credentials); without either, no hints.
   */
  readonly listenUrl?: Redacted.Redacted | string | undefined
}

// Through a variable: `pg` ships no types, and only its `Client` constructor is used (as `Listen.ListenClient`).
const pgModule: string = "pg"

/** How the `LISTEN` connection connects: `pg` `Client` options, built when it connects (secrets stay redacted until then). */
type ListenConfig = () => Record<string, unknown>

const listenClientOf = (module: unknown): ((config: Record<string, unknown>) => Listen.ListenClient) | undefined => {
  const candidates = typeof module === "object" && module !== null
    ? ["default" in module ? module.default : undefined, module]
    : []
  for (const candidate of candidates) {
    if (typeof candidate === "object" && candidate !== null && "Client" in candidate && typeof candidate.Client === "function") {
      const Client = candidate.Client as new(config: Record<string, unknown>) => Listen.ListenClient
      return (config) => new Client(config)
    }
  }
  return undefined
}

/** The hints stream on a `LISTEN` connection, running for the scope. */
const hintsOn = (
  config: ListenConfig,
  prefix: string,
  waiting: Waiting.Waiting
): Effect.Effect<Stream.Stream<Hint>, BackendError, Scope.Scope> =>
  Effect.gen(function*() {
    const module = yield* loadDriver(backend, "pg", install, () => import(pgModule) as Promise<unknown>)
    const makeClient = listenClientOf(module)
    if (makeClient === undefined) {
      return yield* Effect.fail(new BackendError({ backend, operation: "loadDriver", cause: "the pg module has no Client" }))
    }
    return yield* Listen.make(() => makeClient(config()), channel(prefix), waiting)
  })

const fromUrl = (url: Redacted.Redacted): ListenConfig => () => ({ connectionString: Redacted.value(url) })

/** The connection settings of a `PgClient` (its `config`): its `url`, or its host, port, database and credentials. */
const listenConfigOfClient = (sql: SqlClient.SqlClient): ListenConfig | undefined => {
  const config: unknown = "config" in sql ? sql.config : undefined
  if (typeof config !== "object" || config === null) return undefined
  const field = (key: string): unknown => (key in config ? (config as Record<string, unknown>)[key] : undefined)
  const url = field("url")
  if (Redacted.isRedacted(url)) return fromUrl(url as Redacted.Redacted)
  if (typeof url === "string") return fromUrl(Redacted.make(url))
  if (field("host") === undefined && field("database") === undefined) return undefined
  return () => {
    const password = field("password")
    const settings: Record<string, unknown> = {
      host: field("host"),
      port: field("port"),
      database: field("database"),
      user: field("username"),
      password: Redacted.isRedacted(password) ? Redacted.value(password as Redacted.Redacted) : password,
      ssl: field("ssl")
    }
    return Object.fromEntries(Object.entries(settings).filter(([, value]) => value !== undefined))
  }
}

/**
 * The backend on a PostgreSQL `SqlClient`: runs the migration (idempotent, serialised between
 * processes), starts the `LISTEN` connection when a URL is known, for the scope.
 */
export const makeWithClient = (
  sql: SqlClient.SqlClient,
  options: PgClientOptions = {}
): Effect.Effect<LeaseBackendService, BackendError | SimbaConfigError, Scope.Scope> =>
  Effect.flatMap(reservedOf(backend, options), (lanes) => makeOn(sql, options, lanes))

/** `makeWithClient`, with `lanes` reserved connections when the pool is the backend's own. */
const makeOn = (
  sql: SqlClient.SqlClient,
  options: PgClientOptions,
  lanes: number | undefined
): Effect.Effect<LeaseBackendService, BackendError | SimbaConfigError, Scope.Scope> =>
  Effect.gen(function*() {
    const prefix = yield* prefixOf(backend, options)
    const lockDelay = yield* lockDelayOf(backend, options)
    const listen = options.listenUrl === undefined
      ? listenConfigOfClient(sql)
      : fromUrl(typeof options.listenUrl === "string" ? Redacted.make(options.listenUrl) : options.listenUrl)
    const waiting = yield* Waiting.make()
    const hints = listen === undefined ? Stream.empty : yield* hintsOn(listen, prefix, waiting)
    return yield* SqlBackend.make(sql, { backend, prefix, hints, waiting, lockDelay, lanes, holds: true })
  })

const sqlClientTag = loadDriver(backend, "@effect/sql", install, () => import("@effect/sql/SqlClient")).pipe(
  Effect.map((module) => module.SqlClient)
)

/** Provides `LeaseBackend` on the `SqlClient` (a `PgClient`) in the context. */
export const layerWithClient = (
  options: PgClientOptions = {}
): Layer.Layer<LeaseBackend, BackendError | SimbaConfigError, SqlClient.SqlClient> =>
  Layer.scoped(LeaseBackend, Effect.flatMap(Effect.flatMap(sqlClientTag, (tag) => tag), (sql) => makeWithClient(sql, options)))

/**
 * The backend on a pool of its own to `options.url` (default `postgres://127.0.0.1:5432/postgres`), closed with the
 * scope: runs the migration, then serves the leases.
 */
export const make = (
  options: PgOptions = {}
): Effect.Effect<LeaseBackendService, BackendError | SimbaConfigError, Scope.Scope> =>
  Effect.gen(function*() {
    const settings = yield* resolve(backend, options, defaultUrl)
    // checked before connecting: a bad option is a SimbaConfigError, not a connect failure
    yield* lockDelayOf(backend, options)
    const PgClient = yield* loadDriver(backend, "@effect/sql-pg", install, () => import("@effect/sql-pg/PgClient"))
    const tag = yield* sqlClientTag
    const context = yield* Layer.build(PgClient.layer({ url: settings.url, maxConnections: settings.maxConnections })).pipe(
      Effect.mapError((cause) => new BackendError({ backend, operation: "connect", cause }))
    )
    return yield* makeOn(Context.get(context, tag), {
      tablePrefix: settings.prefix,
      listenUrl: settings.url,
      lockDelay: options.lockDelay
    }, lanesOf(settings.maxConnections))
  })

/** Provides `LeaseBackend` on a pool of its own to `options.url` (see `make`). */
export const layer = (options: PgOptions = {}): Layer.Layer<LeaseBackend, BackendError | SimbaConfigError> =>
  Layer.scoped(LeaseBackend, make(options))

/** Provides `LeaseBackend` with options read from `config`. */
export const layerConfig = (
  config: Config.Config<PgOptions>
): Layer.Layer<LeaseBackend, ConfigError.ConfigError | BackendError | SimbaConfigError> =>
  Layer.unwrapEffect(Effect.map(config, layer))

/**
 * Options from the environment: `SIMBA_PG_URL` (default `postgres://127.0.0.1:5432/postgres`),
 * `SIMBA_PG_TABLE_PREFIX` (default `simba_`), `SIMBA_PG_MAX_CONNECTIONS` (default 10),
 * `SIMBA_PG_LOCK_DELAY` (default 15 s).
 */
export const config: Config.Config<PgOptions> = pgConfig
