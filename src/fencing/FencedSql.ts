/**
 * Fenced SQL writes for `@effect/sql` (`simba/fencing/sql`), on PostgreSQL and MySQL/MariaDB, with the
 * `SqlClient` already in your context.
 *
 * A table `simba_fence(resource, token)` keeps the highest token seen per resource. `write` runs your
 * statements in a transaction that first raises the fence in one statement (an upsert that keeps
 * `GREATEST(stored, token)` and locks the fence row), then reads the result: if a higher token is
 * stored the transaction rolls back with `FencedWriteRejectedError`; otherwise your statements run while
 * the row lock is held, so a racing writer waits and then either applies after you (its token is not
 * lower) or is refused. Every writer of the resource must go through the fence.
 *
 * ```ts
 * import * as FencedSql from "simba/fencing/sql"
 *
 * yield* FencedSql.ensureTable()                                  // once, at startup (idempotent)
 * yield* Simba.withLock("orders", (term) =>
 *   sql`UPDATE orders SET status = 'charged' WHERE id = ${id}`.pipe(FencedSql.write("orders", term)))
 * ```
 *
 * Inside your own `sql.withTransaction`, call `guard(resource, term)` first; it must run in a
 * transaction (it dies otherwise) so that its row lock covers what follows.
 */
import * as SqlClient from "@effect/sql/SqlClient"
import { SqlError } from "@effect/sql/SqlError"
import * as Effect from "effect/Effect"
import { dual } from "effect/Function"
import * as Option from "effect/Option"
import * as Schema from "effect/Schema"
import {
  type Fence,
  FencedWriteRejectedError,
  type FenceStore,
  InvalidFenceError,
  validate
} from "./Fencing.js"

export { type Fence, FencedWriteRejectedError, InvalidFenceError } from "./Fencing.js"

/** Which table keeps the fences (default `simba_fence`). */
export interface FenceTableOptions {
  readonly table?: string | undefined
}

export const defaultTable = "simba_fence"

/** Resources are 1–255 characters; any characters (they are bound as parameters). */
const resourceRules = { maxLength: 255 } as const

const tableOf = (options: FenceTableOptions | undefined): string => options?.table ?? defaultTable

const unsupportedDialect = Effect.dieMessage(
  "simba/fencing/sql supports PostgreSQL (@effect/sql-pg) and MySQL/MariaDB (@effect/sql-mysql2)"
)

/**
 * Creates the fence table unless it exists. Safe to run concurrently (on PostgreSQL, where concurrent
 * `CREATE TABLE IF NOT EXISTS` can collide, creators take a transaction-level advisory lock first).
 * On MySQL/MariaDB the resource column is `VARBINARY`, so resources compare byte for byte as on
 * PostgreSQL (no case folding, no trailing-space padding).
 */
export const ensureTable = (options?: FenceTableOptions): Effect.Effect<void, SqlError, SqlClient.SqlClient> =>
  Effect.flatMap(SqlClient.SqlClient, (sql) => {
    const name = tableOf(options)
    const table = sql(name)
    return sql.onDialectOrElse({
      pg: () =>
        sql.withTransaction(
          sql`SELECT pg_advisory_xact_lock(hashtext(${`simba-fence-table:${name}`}))`.pipe(
            Effect.zipRight(
              sql`CREATE TABLE IF NOT EXISTS ${table} (resource VARCHAR(255) NOT NULL PRIMARY KEY, token BIGINT NOT NULL)`
            ),
            Effect.asVoid
          )
        ),
      mysql: () =>
        Effect.asVoid(
          sql`CREATE TABLE IF NOT EXISTS ${table} (resource VARBINARY(1020) NOT NULL PRIMARY KEY, token BIGINT NOT NULL)`
        ),
      orElse: () => unsupportedDialect
    })
  })

const TokenRows = Schema.Array(Schema.Struct({ token: Schema.BigInt }))

/** The fence rows read back, decoded; an unexpected shape is reported as the `SqlError` it is. */
const decodeTokens = (statement: string) => (rows: unknown): Effect.Effect<ReadonlyArray<bigint>, SqlError> =>
  Schema.decodeUnknown(TokenRows)(rows).pipe(
    Effect.map((decoded) => decoded.map((row) => row.token)),
    Effect.mapError((cause) => new SqlError({ cause, message: `unexpected rows from the fence table (${statement})` }))
  )

/**
 * Raises the fence of `resource` to the token and holds its row lock until the surrounding transaction
 * ends; fails with `FencedWriteRejectedError` when a higher token was already seen (the caller's
 * transaction then rolls back). Equal tokens pass: one term may write many times.
 *
 * PostgreSQL: `INSERT ... ON CONFLICT (resource) DO UPDATE SET token = GREATEST(fence.token,
 * EXCLUDED.token) RETURNING token`. MySQL/MariaDB: `INSERT ... ON DUPLICATE KEY UPDATE token =
 * GREATEST(token, VALUES(token))`, then `SELECT token ... FOR UPDATE` of the row it locked.
 */
export const guard = (
  resource: string,
  fence: Fence,
  options?: FenceTableOptions
): Effect.Effect<void, FencedWriteRejectedError | InvalidFenceError | SqlError, SqlClient.SqlClient> =>
  Effect.gen(function*() {
    const token = yield* validate(resource, fence, resourceRules)
    const sql = yield* SqlClient.SqlClient
    if (Option.isNone(yield* Effect.serviceOption(SqlClient.TransactionConnection))) {
      return yield* Effect.dieMessage(
        "FencedSql.guard must run inside sql.withTransaction (or use FencedSql.write), " +
          "so that the fence's row lock covers the write"
      )
    }
    const table = sql(tableOf(options))
    const text = token.toString()
    const rows = yield* sql.onDialectOrElse({
      pg: () =>
        sql`INSERT INTO ${table} (resource, token) VALUES (${resource}, CAST(${text} AS BIGINT))
            ON CONFLICT (resource) DO UPDATE SET token = GREATEST(${table}.token, EXCLUDED.token)
            RETURNING CAST(token AS TEXT) AS token`,
      mysql: () =>
        Effect.zipRight(
          sql`INSERT INTO ${table} (resource, token) VALUES (${resource}, CAST(${text} AS SIGNED))
              ON DUPLICATE KEY UPDATE token = GREATEST(token, VALUES(token))`,
          sql`SELECT CAST(token AS CHAR) AS token FROM ${table} WHERE resource = ${resource} FOR UPDATE`
        ),
      orElse: () => unsupportedDialect
    })
    const [highest] = yield* decodeTokens("guard")(rows)
    if (highest === undefined) {
      return yield* new SqlError({ message: `the fence row of ${JSON.stringify(resource)} is missing after its upsert` })
    }
    if (highest > token) {
      return yield* new FencedWriteRejectedError({ resource, token, highest })
    }
  })

/**
 * Runs `self` (your `UPDATE`/`INSERT`/...) only if the token is not below the highest seen for
 * `resource`, in one transaction with the fence (a savepoint when already in one). Answers `self`'s
 * result, or fails with `FencedWriteRejectedError` and nothing applied.
 *
 * `sql\`UPDATE ...\`.pipe(FencedSql.write("orders", term))` or `FencedSql.write(effect, "orders", term)`.
 */
export const write: {
  (resource: string, fence: Fence, options?: FenceTableOptions): <A, E, R>(
    self: Effect.Effect<A, E, R>
  ) => Effect.Effect<A, E | FencedWriteRejectedError | InvalidFenceError | SqlError, R | SqlClient.SqlClient>
  <A, E, R>(
    self: Effect.Effect<A, E, R>,
    resource: string,
    fence: Fence,
    options?: FenceTableOptions
  ): Effect.Effect<A, E | FencedWriteRejectedError | InvalidFenceError | SqlError, R | SqlClient.SqlClient>
} = dual(
  (args) => Effect.isEffect(args[0]),
  <A, E, R>(
    self: Effect.Effect<A, E, R>,
    resource: string,
    fence: Fence,
    options?: FenceTableOptions
  ): Effect.Effect<A, E | FencedWriteRejectedError | InvalidFenceError | SqlError, R | SqlClient.SqlClient> =>
    Effect.flatMap(SqlClient.SqlClient, (sql) => sql.withTransaction(Effect.zipRight(guard(resource, fence, options), self)))
)

/** The highest token accepted for `resource`, if any. */
export const highest = (
  resource: string,
  options?: FenceTableOptions
): Effect.Effect<Option.Option<bigint>, SqlError, SqlClient.SqlClient> =>
  Effect.flatMap(SqlClient.SqlClient, (sql) => {
    const table = sql(tableOf(options))
    return sql.onDialectOrElse({
      pg: () => sql`SELECT CAST(token AS TEXT) AS token FROM ${table} WHERE resource = ${resource}`,
      mysql: () => sql`SELECT CAST(token AS CHAR) AS token FROM ${table} WHERE resource = ${resource}`,
      orElse: () => unsupportedDialect
    }).pipe(Effect.flatMap(decodeTokens("highest")), Effect.map((tokens) => Option.fromNullable(tokens[0])))
  })

/**
 * A `FenceStore` kept in the fence table, for `FencedHttp.middleware`: a service that fences its
 * requests this way remembers the highest token across restarts and replicas.
 */
export const store = (
  options?: FenceTableOptions
): Effect.Effect<FenceStore<SqlError | InvalidFenceError>, never, SqlClient.SqlClient> =>
  Effect.map(SqlClient.SqlClient, (sql): FenceStore<SqlError | InvalidFenceError> => ({
    fenced: (resource, token, operation) =>
      write(operation, resource, token, options).pipe(Effect.provideService(SqlClient.SqlClient, sql)),
    highest: (resource) => highest(resource, options).pipe(Effect.provideService(SqlClient.SqlClient, sql))
  }))
