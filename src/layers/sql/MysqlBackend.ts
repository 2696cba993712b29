/**
 * The MySQL 8 / MariaDB 10.5+ backend (`@effect/sql-mysql2`): `SqlBackend` with one stored procedure
 * per operation (`mysqlMigrations.ts`), times from `UTC_TIMESTAMP(6)` read after the locks. MySQL has no
 * push, so hints come from the backend itself: a release through it at once, and one poll per
 * `pollInterval` for the names local candidates wait on (none while nobody waits). `@effect/sql-mysql2`
 * is an optional peer, loaded when a layer of this module is built. `make`/`layer`/`layerConfig` open
 * a pool of their own; `makeWithClient`/`layerWithClient` use a `SqlClient` the application owns
 * (never inside one of its transactions). A timed-out call cannot be cancelled on MySQL: it finishes
 * on its connection. Tables and procedures: docs/design.md, "PostgreSQL and MySQL/MariaDB".
 */
import type * as SqlClient from "@effect/sql/SqlClient"
import * as Config from "effect/Config"
import * as Context from "effect/Context"
import type * as ConfigError from "effect/ConfigError"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import type * as Scope from "effect/Scope"
import type { SimbaConfigError } from "../../Errors.js"
import type { DurationOption } from "../../internal/options.js"
import { BackendError, LeaseBackend, type LeaseBackendService, loadDriver } from "../../LeaseBackend.js"
import * as MysqlMigrations from "./mysqlMigrations.js"
import { defaultPrefix } from "./migrations.js"
import { type ClientOptions, config as sqlConfig, lanesOf, pollIntervalOf, prefixOf, reservedOf, resolve, type SqlOptions } from "./options.js"
import * as SqlBackend from "./SqlBackend.js"
import * as Waiting from "./waiting.js"

export type { ClientOptions, SqlOptions } from "./options.js"

/**
 * The SQL the migration runs for `tablePrefix` (tables, indexes, routines), in order, for DBAs who
 * create the schema themselves (the migration then finds it installed and does nothing).
 */
export const migrationStatements = (tablePrefix: string = defaultPrefix): ReadonlyArray<string> =>
  MysqlMigrations.mysql(tablePrefix).statements

/** The backend name used in errors, metrics and spans. */
export const backend = "mysql"

export const defaultUrl = "mysql://root@127.0.0.1:3306/test"

const install = "npm install @effect/sql@^0.52 @effect/sql-mysql2@^0.53"

/** What the MySQL backend adds to the SQL options. */
interface Polling {
  /**
   * How often the names local candidates wait on are checked (one query for all of them, only while
   * some wait): the longest a hand-over between processes waits for. Default 60 ms.
   */
  readonly pollInterval?: DurationOption | undefined
}

/** Options of `make` / `layer`: a pool of its own. */
export interface MysqlOptions extends SqlOptions, Polling {}

/** Options of `makeWithClient` / `layerWithClient`. */
export interface MysqlClientOptions extends ClientOptions, Polling {}

/** The backend on a MySQL/MariaDB `SqlClient`: runs the migration (idempotent, serialised between processes). */
export const makeWithClient = (
  sql: SqlClient.SqlClient,
  options: MysqlClientOptions = {}
): Effect.Effect<LeaseBackendService, BackendError | SimbaConfigError, Scope.Scope> =>
  Effect.flatMap(reservedOf(backend, options), (lanes) => makeOn(sql, options, lanes))

/** `makeWithClient`, with `lanes` reserved connections when the pool is the backend's own. */
const makeOn = (
  sql: SqlClient.SqlClient,
  options: MysqlClientOptions,
  lanes: number | undefined
): Effect.Effect<LeaseBackendService, BackendError | SimbaConfigError, Scope.Scope> =>
  Effect.gen(function*() {
    const prefix = yield* prefixOf(backend, options)
    const pollInterval = yield* pollIntervalOf(backend, options)
    const waiting = yield* Waiting.make()
    return yield* SqlBackend.make(sql, { backend, prefix, hints: undefined, waiting, pollInterval, lanes, holds: true })
  })

const sqlClientTag = loadDriver(backend, "@effect/sql", install, () => import("@effect/sql/SqlClient")).pipe(
  Effect.map((module) => module.SqlClient)
)

/** Provides `LeaseBackend` on the `SqlClient` (a `MysqlClient`) in the context. */
export const layerWithClient = (
  options: MysqlClientOptions = {}
): Layer.Layer<LeaseBackend, BackendError | SimbaConfigError, SqlClient.SqlClient> =>
  Layer.scoped(LeaseBackend, Effect.flatMap(Effect.flatMap(sqlClientTag, (tag) => tag), (sql) => makeWithClient(sql, options)))

/**
 * The backend on a pool of its own to `options.url` (default `mysql://root@127.0.0.1:3306/test`), closed with the
 * scope: runs the migration, then serves the leases.
 */
export const make = (
  options: MysqlOptions = {}
): Effect.Effect<LeaseBackendService, BackendError | SimbaConfigError, Scope.Scope> =>
  Effect.gen(function*() {
    const settings = yield* resolve(backend, options, defaultUrl)
    // checked before connecting: a bad option is a SimbaConfigError, not a connect failure
    yield* pollIntervalOf(backend, options)
    const MysqlClient = yield* loadDriver(backend, "@effect/sql-mysql2", install, () => import("@effect/sql-mysql2/MysqlClient"))
    const tag = yield* sqlClientTag
    const context = yield* Layer.build(MysqlClient.layer({ url: settings.url, maxConnections: settings.maxConnections })).pipe(
      Effect.mapError((cause) => new BackendError({ backend, operation: "connect", cause }))
    )
    return yield* makeOn(Context.get(context, tag), {
      tablePrefix: settings.prefix,
      pollInterval: options.pollInterval
    }, lanesOf(settings.maxConnections))
  })

/** Provides `LeaseBackend` on a pool of its own to `options.url` (see `make`). */
export const layer = (options: MysqlOptions = {}): Layer.Layer<LeaseBackend, BackendError | SimbaConfigError> =>
  Layer.scoped(LeaseBackend, make(options))

/** Provides `LeaseBackend` with options read from `config`. */
export const layerConfig = (
  config: Config.Config<SqlOptions>
): Layer.Layer<LeaseBackend, ConfigError.ConfigError | BackendError | SimbaConfigError> =>
  Layer.unwrapEffect(Effect.map(config, layer))

/**
 * Options from the environment: `SIMBA_MYSQL_URL` (default `mysql://root@127.0.0.1:3306/test`),
 * `SIMBA_MYSQL_TABLE_PREFIX` (default `simba_`), `SIMBA_MYSQL_MAX_CONNECTIONS` (default 10).
 */
export const config: Config.Config<SqlOptions> = sqlConfig("MYSQL")
