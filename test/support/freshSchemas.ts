/**
 * vitest global setup: drops the tables and routines of the test prefixes (`simba_t_...`) in the
 * local PostgreSQL and MariaDB before a run. The migration installs nothing where it finds its
 * schema version's marker, so routines left by an earlier run of a schema version still in the
 * making would otherwise be tested instead of the ones in the source. Applications never see this:
 * a released version's routines do not change.
 */
import mysql from "mysql2/promise"
import pg from "pg"
import { mysqlUrl, pgUrl } from "../sql/SqlServers.js"

const testPrefix = "simba\\_t\\_%"

const dropPostgres = async (): Promise<void> => {
  const client = new pg.Client({ connectionString: pgUrl })
  await client.connect()
  try {
    const routines = await client.query<{ signature: string }>(
      "SELECT p.oid::regprocedure::text AS signature FROM pg_proc p JOIN pg_namespace n ON n.oid = p.pronamespace WHERE n.nspname = 'public' AND p.proname LIKE $1",
      [testPrefix]
    )
    for (const { signature } of routines.rows) await client.query(`DROP FUNCTION IF EXISTS ${signature} CASCADE`)
    const tables = await client.query<{ name: string }>(
      "SELECT tablename AS name FROM pg_tables WHERE schemaname = 'public' AND tablename LIKE $1",
      [testPrefix]
    )
    for (const { name } of tables.rows) await client.query(`DROP TABLE IF EXISTS ${name} CASCADE`)
  } finally {
    await client.end()
  }
}

const dropMysql = async (): Promise<void> => {
  const conn = await mysql.createConnection(mysqlUrl)
  try {
    const [routines] = await conn.query<Array<mysql.RowDataPacket>>(
      "SELECT ROUTINE_NAME AS name, ROUTINE_TYPE AS type FROM information_schema.ROUTINES WHERE ROUTINE_SCHEMA = DATABASE() AND ROUTINE_NAME LIKE ?",
      [testPrefix]
    )
    for (const { name, type } of routines) await conn.query(`DROP ${String(type)} IF EXISTS \`${String(name)}\``)
    const [tables] = await conn.query<Array<mysql.RowDataPacket>>(
      "SELECT TABLE_NAME AS name FROM information_schema.TABLES WHERE TABLE_SCHEMA = DATABASE() AND TABLE_NAME LIKE ?",
      [testPrefix]
    )
    for (const { name } of tables) await conn.query(`DROP TABLE IF EXISTS \`${String(name)}\``)
  } finally {
    await conn.end()
  }
}

export default async function freshSchemas(): Promise<void> {
  await Promise.all([dropPostgres(), dropMysql()])
}
