/**
 * Options of the SQL backends, from code or the environment, and their validation: an invalid option
 * fails with `SimbaConfigError { field: "<backend>.<option>", value, rule }` (and `variable`, when
 * it was read from the environment) before any connection is made.
 */
import type * as Config from "effect/Config"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Either from "effect/Either"
import * as Redacted from "effect/Redacted"
import type { SimbaConfigError } from "../../Errors.js"
import * as Options from "../../internal/options.js"
import { defaultLockDelayMs, defaultPrefix, prefixPattern } from "./migrations.js"
import type { Backend } from "./SqlBackend.js"

/** Options of `PgBackend.layer` / `MysqlBackend.layer`. */
export interface SqlOptions {
  /** `postgres://user:password@host:port/database` or `mysql://user:password@host:port/database`. */
  readonly url?: Redacted.Redacted | string | undefined
  /** First part of every table and routine name: `[a-z][a-z0-9_]*`, at most 30 characters. Default `simba_`. */
  readonly tablePrefix?: string | undefined
  /** Size of the connection pool. Default 10. */
  readonly maxConnections?: number | undefined
}

/** Options of `layerWithClient` / `makeWithClient`, for a `SqlClient` the application already has. */
export interface ClientOptions {
  /** As in `SqlOptions`. Default `simba_`. */
  readonly tablePrefix?: string | undefined
  /**
   * How many connections of your pool the backend reserves, for its lifetime, for its calls: each
   * call is then the driver's query alone (about 100 µs less client CPU per call than taking a
   * connection from the pool). Keep your pool larger than this. Default 0: a connection is taken
   * from the pool per call. `layer` / `make` reserve all but one of their own pool's connections.
   */
  readonly reservedConnections?: number | undefined
}

export interface Resolved {
  readonly url: Redacted.Redacted
  readonly prefix: string
  readonly maxConnections: number
}

/** The table prefix, checked. */
export const prefixOf = (backend: Backend, options: ClientOptions): Effect.Effect<string, SimbaConfigError> =>
  Effect.flatMap(Options.check(backend, options), (check) => prefixChecked(check, options.tablePrefix))

const prefixChecked = (check: Options.Check, tablePrefix: string | undefined): Effect.Effect<string, SimbaConfigError> => {
  const prefix = tablePrefix ?? defaultPrefix
  return prefixPattern.test(prefix)
    ? Effect.succeed(prefix)
    : check.invalid("tablePrefix", prefix, "must be a lowercase letter followed by at most 29 of [a-z0-9_]")
}

/** The `pollInterval` option (MySQL), checked: at least 1 ms, default 60 ms. */
export const pollIntervalOf = (
  backend: Backend,
  options: { readonly pollInterval?: Options.DurationOption | undefined }
): Effect.Effect<Duration.Duration, SimbaConfigError> =>
  Effect.flatMap(Options.check(backend, options), (check) =>
    Effect.map(check.duration("pollInterval", options.pollInterval, 60), Duration.millis))

/** What the PostgreSQL backend adds to the SQL options. */
export interface LockDelayOption {
  /**
   * How long nothing is granted after the backend found that the database may have lost commits (a
   * crash restart, a replica promoted): set it at least the longest `leaseDuration` of any client.
   * Default 15 s; `0` turns the protection off (docs/sql.md, "Commits without a flush").
   */
  readonly lockDelay?: Options.DurationOption | undefined
}

/** The `lockDelay` option (PostgreSQL), checked: not negative, default 15 s. */
export const lockDelayOf = (
  backend: Backend,
  options: LockDelayOption
): Effect.Effect<Duration.Duration, SimbaConfigError> =>
  Effect.flatMap(Options.check(backend, options), (check) =>
    Effect.map(check.duration("lockDelay", options.lockDelay, defaultLockDelayMs, { least: 0 }), (ms) => Duration.millis(Math.ceil(ms))))

/**
 * The lanes (`lanes.ts`) a backend reserves on a pool of its own of `maxConnections`: all but one,
 * which stays for the migration and `inspect`; none on a pool of one.
 */
export const lanesOf = (maxConnections: number): number | undefined => maxConnections > 1 ? maxConnections - 1 : undefined

/** The `reservedConnections` option, checked: an integer from 0; 0 is none (`undefined`). */
export const reservedOf = (backend: Backend, options: ClientOptions): Effect.Effect<number | undefined, SimbaConfigError> =>
  Effect.flatMap(Options.check(backend, options), (check) =>
    Effect.map(check.integer("reservedConnections", options.reservedConnections, 0, { least: 0 }), (n) => n === 0 ? undefined : n))

/** Checks `options` and fills in the defaults. */
export const resolve = (
  backend: Backend,
  options: SqlOptions,
  defaultUrl: string
): Effect.Effect<Resolved, SimbaConfigError> =>
  Effect.gen(function*() {
    const check = yield* Options.check(backend, options)
    const prefix = yield* prefixChecked(check, options.tablePrefix)
    const url = options.url === undefined
      ? Redacted.make(defaultUrl)
      : typeof options.url === "string"
      ? Redacted.make(options.url)
      : options.url
    const schemes = backend === "postgres" ? ["postgres:", "postgresql:"] : ["mysql:"]
    const parsed = Options.parseUrl(Redacted.value(url), schemes)
    // Shown with its password hidden (`Options.show`).
    if (Either.isLeft(parsed)) return yield* check.invalid("url", Redacted.value(url), parsed.left)
    const maxConnections = yield* check.integer("maxConnections", options.maxConnections, 10, { least: 1 })
    return { url, prefix, maxConnections }
  })

/**
 * Options from the environment: `SIMBA_<NAME>_URL` (default: the backend's), `SIMBA_<NAME>_TABLE_PREFIX`
 * (default `simba_`), `SIMBA_<NAME>_MAX_CONNECTIONS` (default 10), `<NAME>` `PG` or `MYSQL`. An
 * invalid one fails the backend's start with a `SimbaConfigError` naming the variable.
 */
export const config = (name: "PG" | "MYSQL"): Config.Config<SqlOptions> =>
  Options.fromEnv({
    url: Options.secret(`SIMBA_${name}_URL`),
    tablePrefix: Options.text(`SIMBA_${name}_TABLE_PREFIX`),
    maxConnections: Options.integer(`SIMBA_${name}_MAX_CONNECTIONS`)
  })

/** As `config("PG")`, and `SIMBA_PG_LOCK_DELAY` (a duration such as `15s`; see `LockDelayOption`). */
export const pgConfig: Config.Config<SqlOptions & LockDelayOption> = Options.fromEnv({
  url: Options.secret("SIMBA_PG_URL"),
  tablePrefix: Options.text("SIMBA_PG_TABLE_PREFIX"),
  maxConnections: Options.integer("SIMBA_PG_MAX_CONNECTIONS"),
  lockDelay: Options.duration("SIMBA_PG_LOCK_DELAY")
})
