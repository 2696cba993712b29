/**
 * vitest global setup: drops the tables and routines of the test prefixes (`simba_t_...`) in the
 * local PostgreSQL and MariaDB before a run. The migration installs nothing where it finds its
 * schema version's marker, so routines left by an earlier run of a schema version still in the
 * making would otherwise be tested instead of the ones in the source. Applications never see this:
 * a released version's routines do not change.
 */
import * as MysqlClient from "@effect/sql-mysql2/MysqlClient"
import * as PgClient from "@effect/sql-pg/PgClient"
import { SqlClient } from "@effect/sql/SqlClient"
import * as Effect from "effect/Effect"
import * as Redacted from "effect/Redacted"
import { mysqlUrl, pgUrl } from "../sql/SqlServers.js"

/** The prefix of every table prefix the tests use. */
const testPrefix = "simba_t_"

/** A LIKE pattern of the names starting with `prefix` (its `_` and `%` taken literally). */
const startingWith = (prefix: string) => `${prefix.replace(/[\\_%]/g, (c) => `\\${c}`)}%`

/** Drops the PostgreSQL routines and tables whose names start with `prefix` (needs a `SqlClient`). */
export const dropPostgresPrefix = (prefix: string) => Effect.gen(function*() {
  const sql = yield* SqlClient
  const like = startingWith(prefix)
  const routines = yield* sql.unsafe<{ signature: string }>(
    "SELECT p.oid::regprocedure::text AS signature FROM pg_proc p JOIN pg_namespace n ON n.oid = p.pronamespace WHERE n.nspname = 'public' AND p.proname LIKE $1",
    [like]
  )
  for (const { signature } of routines) yield* sql.unsafe(`DROP FUNCTION IF EXISTS ${signature} CASCADE`)
  const tables = yield* sql.unsafe<{ name: string }>(
    "SELECT tablename AS name FROM pg_tables WHERE schemaname = 'public' AND tablename LIKE $1",
    [like]
  )
  for (const { name } of tables) yield* sql.unsafe(`DROP TABLE IF EXISTS ${name} CASCADE`)
})

const dropPostgres = dropPostgresPrefix(testPrefix).pipe(Effect.provide(PgClient.layer({ url: Redacted.make(pgUrl), maxConnections: 1 })))

/** Drops the MySQL/MariaDB routines and tables whose names start with `prefix` (needs a `SqlClient`). */
export const dropMysqlPrefix = (prefix: string) => Effect.gen(function*() {
  const sql = yield* SqlClient
  const like = startingWith(prefix)
  const routines = yield* sql.unsafe<{ name: string; type: string }>(
    "SELECT ROUTINE_NAME AS name, ROUTINE_TYPE AS type FROM information_schema.ROUTINES WHERE ROUTINE_SCHEMA = DATABASE() AND ROUTINE_NAME LIKE ?",
    [like]
  )
  for (const { name, type } of routines) yield* sql.unsafe(`DROP ${type} IF EXISTS \`${name}\``)
  const tables = yield* sql.unsafe<{ name: string }>(
    "SELECT TABLE_NAME AS name FROM information_schema.TABLES WHERE TABLE_SCHEMA = DATABASE() AND TABLE_NAME LIKE ?",
    [like]
  )
  for (const { name } of tables) yield* sql.unsafe(`DROP TABLE IF EXISTS \`${name}\``)
})

const dropMysql = dropMysqlPrefix(testPrefix).pipe(Effect.provide(MysqlClient.layer({ url: Redacted.make(mysqlUrl), maxConnections: 1 })))

export default function freshSchemas(): Promise<void> {
  return Effect.runPromise(Effect.all([dropPostgres, dropMysql], { concurrency: 2, discard: true }))
}
