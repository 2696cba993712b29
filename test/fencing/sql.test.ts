/**
 * `simba/fencing/sql` on the real servers: PostgreSQL 15 (127.0.0.1:5432, db `test`) through
 * `@effect/sql-pg` and MariaDB (127.0.0.1:3306, db `test`) through `@effect/sql-mysql2`. The same
 * cases run on both. Every test makes its own tables (random names) and drops them, so runs repeat
 * and run in parallel.
 */
import { describe, expect, layer } from "@effect/vitest"
import * as SqlClient from "@effect/sql/SqlClient"
import type { SqlError } from "@effect/sql/SqlError"
import { MysqlClient } from "@effect/sql-mysql2"
import { PgClient } from "@effect/sql-pg"
import * as Arr from "effect/Array"
import * as Deferred from "effect/Deferred"
import * as Effect from "effect/Effect"
import * as Exit from "effect/Exit"
import * as Fiber from "effect/Fiber"
import type * as Layer from "effect/Layer"
import * as Option from "effect/Option"
import * as Schema from "effect/Schema"
import * as Random from "effect/Random"
import { randomBytes } from "node:crypto"
import * as FencedSql from "../../src/fencing/FencedSql.js"
import { FencedWriteRejectedError, InvalidFenceError } from "../../src/fencing/Fencing.js"

const unique = (prefix: string) => `${prefix}_${randomBytes(6).toString("hex")}`

/** A fence table and a user table `(id, value, writes)` with one row, both dropped after the test. */
const tables = Effect.gen(function*() {
  const sql = yield* SqlClient.SqlClient
  const fence = unique("simba_fence_t")
  const rows = unique("fenced_rows")
  const log = unique("fenced_log")
  yield* Effect.addFinalizer(() =>
    Effect.orDie(Effect.all([
      sql`DROP TABLE IF EXISTS ${sql(fence)}`,
      sql`DROP TABLE IF EXISTS ${sql(rows)}`,
      sql`DROP TABLE IF EXISTS ${sql(log)}`
    ]))
  )
  yield* FencedSql.ensureTable({ table: fence })
  yield* sql`CREATE TABLE ${sql(rows)} (id INT PRIMARY KEY, value VARCHAR(64) NOT NULL, writes INT NOT NULL)`
  yield* sql`INSERT INTO ${sql(rows)} (id, value, writes) VALUES (1, 'initial', 0)`
  yield* sql.onDialectOrElse({
    pg: () => sql`CREATE TABLE ${sql(log)} (seq SERIAL PRIMARY KEY, token BIGINT NOT NULL)`,
    orElse: () => sql`CREATE TABLE ${sql(log)} (seq INT AUTO_INCREMENT PRIMARY KEY, token BIGINT NOT NULL)`
  })
  const options = { table: fence }
  const update = (value: string) =>
    sql`UPDATE ${sql(rows)} SET value = ${value}, writes = writes + 1 WHERE id = 1`
  const logged = (token: bigint) => sql`INSERT INTO ${sql(log)} (token) VALUES (${Number(token)})`
  const row = Effect.flatMap(
    sql`SELECT value, writes FROM ${sql(rows)} WHERE id = 1`,
    Schema.decodeUnknown(Schema.Tuple(Schema.Struct({ value: Schema.String, writes: Schema.Number })))
  ).pipe(Effect.map(([only]) => only))
  const logTokens = Effect.flatMap(
    sql`SELECT token FROM ${sql(log)} ORDER BY seq`,
    Schema.decodeUnknown(Schema.Array(Schema.Struct({ token: Schema.Union(Schema.Number, Schema.NumberFromString) })))
  ).pipe(Effect.map(Arr.map((r) => BigInt(r.token))))
  return { sql, options, update, logged, row, logTokens }
})

const rejection = <A, E>(effect: Effect.Effect<A, E | FencedWriteRejectedError, SqlClient.SqlClient>) =>
  Effect.flip(effect).pipe(Effect.map((error) => {
    expect(error).toBeInstanceOf(FencedWriteRejectedError)
    return error as FencedWriteRejectedError
  }))

const sqlCases = (name: string, live: Layer.Layer<SqlClient.SqlClient, unknown>) =>
  layer(live, { excludeTestServices: true, timeout: "30 seconds" })(`FencedSql on ${name}`, (it) => {
    it.scoped("a paused writer's late write is refused after a newer token wrote, and nothing of it applies", () =>
      Effect.gen(function*() {
        const { logged, options, row, update } = yield* tables
        const resource = unique("orders")
        yield* FencedSql.write(update("former"), resource, 41n, options)
        // the former holder pauses; its successor writes with the next term's token
        yield* FencedSql.write(update("successor"), resource, { token: 42n }, options)
        // the former holder wakes up and writes with the token it still has
        const stale = Effect.zipRight(logged(41n), update("stale"))
        const error = yield* rejection(FencedSql.write(stale, resource, 41n, options))
        expect({ resource: error.resource, token: error.token, highest: error.highest })
          .toEqual({ resource, token: 41n, highest: 42n })
        expect(error.message).toContain("below 42")
        expect(yield* row).toEqual({ value: "successor", writes: 2 })
        expect(yield* FencedSql.highest(resource, options)).toEqual(Option.some(42n))
      }))

    it.scoped("the same term may write twice (equal token), and a higher one after it", () =>
      Effect.gen(function*() {
        const { options, row, update } = yield* tables
        const resource = unique("orders")
        yield* FencedSql.write(update("first"), resource, 7n, options)
        yield* FencedSql.write(update("second"), resource, 7n, options)
        expect(yield* row).toEqual({ value: "second", writes: 2 })
        yield* update("third").pipe(FencedSql.write(resource, 8n, options)) // pipeable form
        expect(yield* row).toEqual({ value: "third", writes: 3 })
        expect(yield* FencedSql.highest(resource, options)).toEqual(Option.some(8n))
      }))

    it.scoped("fences are per resource, compared exactly (case and trailing spaces count)", () =>
      Effect.gen(function*() {
        const { options } = yield* tables
        const resource = unique("orders")
        yield* FencedSql.write(Effect.void, resource, 100n, options)
        yield* FencedSql.write(Effect.void, resource.toUpperCase(), 1n, options)
        yield* FencedSql.write(Effect.void, `${resource} `, 2n, options)
        expect(yield* FencedSql.highest(resource, options)).toEqual(Option.some(100n))
        expect(yield* FencedSql.highest(resource.toUpperCase(), options)).toEqual(Option.some(1n))
        expect(yield* FencedSql.highest(`${resource} `, options)).toEqual(Option.some(2n))
        expect(yield* FencedSql.highest(unique("never"), options)).toEqual(Option.none())
      }))

    it.scoped("the fence and the write share one transaction: a failing write does not raise the fence", () =>
      Effect.gen(function*() {
        const { options, row, sql, update } = yield* tables
        const resource = unique("orders")
        yield* FencedSql.write(update("v5"), resource, 5n, options)
        const failing = Effect.zipRight(update("v9"), sql`INSERT INTO no_such_table_${sql.literal(unique("x"))} VALUES (1)`)
        const exit = yield* Effect.exit(FencedSql.write(failing, resource, 9n, options))
        expect(Exit.isFailure(exit)).toBe(true)
        expect(yield* row).toEqual({ value: "v5", writes: 1 })
        expect(yield* FencedSql.highest(resource, options)).toEqual(Option.some(5n))
        // so a writer with a token between the two still applies
        yield* FencedSql.write(update("v6"), resource, 6n, options)
        expect(yield* row).toEqual({ value: "v6", writes: 2 })
      }))

    it.scoped("guard inside the caller's own transaction; outside any transaction it dies", () =>
      Effect.gen(function*() {
        const { options, row, sql, update } = yield* tables
        const resource = unique("orders")
        yield* sql.withTransaction(Effect.zipRight(FencedSql.guard(resource, 3n, options), update("mine")))
        expect(yield* row).toEqual({ value: "mine", writes: 1 })
        const refused = yield* Effect.flip(
          sql.withTransaction(Effect.zipRight(FencedSql.guard(resource, 2n, options), update("late")))
        )
        expect(refused).toBeInstanceOf(FencedWriteRejectedError)
        expect(yield* row).toEqual({ value: "mine", writes: 1 })
        const outside = yield* Effect.exit(FencedSql.guard(resource, 4n, options))
        expect(Exit.isFailure(outside) && Exit.causeOption(outside).pipe(Option.exists((c) => c._tag === "Die")))
          .toBe(true)
        expect(yield* FencedSql.highest(resource, options)).toEqual(Option.some(3n))
      }))

    it.scoped("bad input never reaches the database", () =>
      Effect.gen(function*() {
        const { options } = yield* tables
        const resource = unique("orders")
        for (const [r, token] of [[resource, 0n], [resource, -1n], [resource, 2n ** 63n], ["", 1n], ["x".repeat(256), 1n]] as const) {
          const error = yield* Effect.flip(FencedSql.write(Effect.void, r, token, options))
          expect(error).toBeInstanceOf(InvalidFenceError)
        }
        expect(yield* FencedSql.highest(resource, options)).toEqual(Option.none())
        yield* FencedSql.write(Effect.void, resource, 2n ** 63n - 1n, options) // the largest BIGINT
        expect(yield* FencedSql.highest(resource, options)).toEqual(Option.some(2n ** 63n - 1n))
      }))

    it.scoped("a racing lower token waits for the holder of the fence row, then is refused; a higher one applies after", () =>
      Effect.gen(function*() {
        const { logTokens, logged, options, row, update } = yield* tables
        const resource = unique("orders")
        yield* FencedSql.write(update("start"), resource, 10n, options)
        const inside = yield* Deferred.make<void>()
        const proceed = yield* Deferred.make<void>()
        // writer 20 holds the fence (its transaction is open) until told to proceed
        const holder = yield* Effect.fork(FencedSql.write(
          Effect.all([logged(20n), update("twenty"), Deferred.succeed(inside, undefined), Deferred.await(proceed)]),
          resource,
          20n,
          options
        ))
        yield* Deferred.await(inside)
        const lower = yield* Effect.fork(Effect.either(FencedSql.write(Effect.zipRight(logged(15n), update("fifteen")), resource, 15n, options)))
        const higher = yield* Effect.fork(FencedSql.write(Effect.zipRight(logged(30n), update("thirty")), resource, 30n, options))
        yield* Effect.sleep("300 millis")
        // both wait on the fence row while the holder's transaction is open
        expect(lower.unsafePoll()).toBeNull()
        expect(higher.unsafePoll()).toBeNull()
        yield* Deferred.succeed(proceed, undefined)
        yield* Fiber.join(holder)
        yield* Fiber.join(higher)
        const lowerResult = yield* Fiber.join(lower)
        expect(lowerResult._tag).toBe("Left")
        expect(yield* logTokens).toEqual([20n, 30n])
        expect(yield* row).toEqual({ value: "thirty", writes: 3 })
      }))

    it.scoped("many concurrent writers: applied writes land in token order, and every refusal saw a higher token", () =>
      Effect.gen(function*() {
        const { logTokens, logged, options, row, update } = yield* tables
        const resource = unique("orders")
        const tokens = Random.shuffle(Arr.range(1, 16).map((n) => BigInt(n)))
        const outcomes = yield* Effect.all(
          Arr.fromIterable(yield* tokens).map((token) =>
            Effect.either(FencedSql.write(Effect.zipRight(logged(token), update(`v${token}`)), resource, token, options))
          ),
          { concurrency: "unbounded" }
        )
        const applied = yield* logTokens
        // applied in non-decreasing token order (the log's sequence is the commit order of the writes)
        expect(applied).toEqual([...applied].sort((a, b) => (a < b ? -1 : a > b ? 1 : 0)))
        expect(applied.at(-1)).toBe(16n)
        const refused = outcomes.flatMap((o) => (o._tag === "Left" ? [o.left] : []))
        expect(refused.length + applied.length).toBe(16)
        for (const error of refused) {
          expect(error).toBeInstanceOf(FencedWriteRejectedError)
          if (error instanceof FencedWriteRejectedError) expect(error.highest).toBeGreaterThan(error.token)
        }
        expect(yield* row).toEqual({ value: "v16", writes: applied.length })
        expect(yield* FencedSql.highest(resource, options)).toEqual(Option.some(16n))
      }))

    it.scoped("ensureTable is idempotent, also when several run at once", () =>
      Effect.gen(function*() {
        const sql = yield* SqlClient.SqlClient
        const fence = unique("simba_fence_c")
        yield* Effect.addFinalizer(() => Effect.orDie(sql`DROP TABLE IF EXISTS ${sql(fence)}`))
        yield* Effect.all(Arr.replicate(FencedSql.ensureTable({ table: fence }), 5), { concurrency: "unbounded" })
        yield* FencedSql.ensureTable({ table: fence })
        yield* FencedSql.write(Effect.void, "r", 1n, { table: fence })
        expect(yield* FencedSql.highest("r", { table: fence })).toEqual(Option.some(1n))
      }))

    it.scoped("store: a FenceStore for FencedHttp kept in the fence table", () =>
      Effect.gen(function*() {
        const { options } = yield* tables
        const resource = unique("orders")
        const store = yield* FencedSql.store(options)
        expect(yield* store.fenced(resource, 2n, Effect.succeed("a"))).toBe("a")
        const error = yield* Effect.flip(store.fenced(resource, 1n, Effect.succeed("b")))
        expect(error).toBeInstanceOf(FencedWriteRejectedError)
        expect(yield* store.highest(resource)).toEqual(Option.some(2n))
      }))
  })

type SqlLayer = Layer.Layer<SqlClient.SqlClient, SqlError | unknown>

describe("simba/fencing/sql", () => {
  const pg: SqlLayer = PgClient.layer({ host: "127.0.0.1", port: 5432, database: "test", username: "postgres" })
  const mysql: SqlLayer = MysqlClient.layer({ host: "127.0.0.1", port: 3306, database: "test", username: "root" })
  sqlCases("PostgreSQL", pg)
  sqlCases("MariaDB", mysql)
})
