/**
 * Options of the SQL backends and their validation: an invalid option fails with
 * `SimbaConfigError { field: "<backend>.<option>", rule }` before any connection is made.
 */
import * as Effect from "effect/Effect"
import * as Redacted from "effect/Redacted"
import { SimbaConfigError } from "../../Errors.js"
import { defaultPrefix, prefixPattern } from "./migrations.js"
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
}

export interface Resolved {
  readonly url: Redacted.Redacted
  readonly prefix: string
  readonly maxConnections: number
}

const invalid = (backend: Backend, option: string, rule: string) =>
  Effect.fail(new SimbaConfigError({ field: `${backend}.${option}`, rule }))

/** The table prefix, checked. */
export const prefixOf = (backend: Backend, tablePrefix: string | undefined): Effect.Effect<string, SimbaConfigError> => {
  const prefix = tablePrefix ?? defaultPrefix
  return prefixPattern.test(prefix)
    ? Effect.succeed(prefix)
    : invalid(backend, "tablePrefix", "must be a lowercase letter followed by at most 29 of [a-z0-9_]")
}

/** Checks `options` and fills in the defaults. */
export const resolve = (
  backend: Backend,
  options: SqlOptions,
  defaultUrl: string
): Effect.Effect<Resolved, SimbaConfigError> =>
  Effect.gen(function*() {
    const prefix = yield* prefixOf(backend, options.tablePrefix)
    const url = options.url === undefined
      ? Redacted.make(defaultUrl)
      : typeof options.url === "string"
      ? Redacted.make(options.url)
      : options.url
    const schemes = backend === "postgres" ? ["postgres:", "postgresql:"] : ["mysql:"]
    let protocol: string
    try {
      protocol = new URL(Redacted.value(url)).protocol
    } catch {
      return yield* invalid(backend, "url", "must be a valid URL") // it may hold a password: never echo it
    }
    if (!schemes.includes(protocol)) {
      return yield* invalid(backend, "url", `must start with ${schemes.map((s) => `${s}//`).join(" or ")}`)
    }
    const maxConnections = options.maxConnections ?? 10
    if (!Number.isInteger(maxConnections) || maxConnections < 1) {
      return yield* invalid(backend, "maxConnections", "must be a positive integer")
    }
    return { url, prefix, maxConnections }
  })
