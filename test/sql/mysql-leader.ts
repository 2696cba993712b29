/**
 * The MySQL/MariaDB counterpart of examples/pg-leader.ts, run as a child process by
 * test/sql/multiprocess.test.ts: a leader-only job on SimbaMysqlLive that appends token-stamped rows
 * to a fenced log in the same database. Prints READY / ELECTED <token> <pid> / WRITE <token>
 * accepted|rejected / REVOKED <token> <pid>.
 *
 * Environment: LEADER_NAME, FENCED_LOG, WRITE_EVERY_MS, SIMBA_MYSQL_URL, SIMBA_MYSQL_TABLE_PREFIX and
 * the SIMBA_* timing settings.
 */
import { NodeRuntime } from "@effect/platform-node"
import { SqlClient } from "@effect/sql"
import { MysqlClient } from "@effect/sql-mysql2"
import { Config, Effect, Layer, Redacted, Schedule } from "effect"
import { Simba, type Term } from "simba"
import { SimbaMysqlLive } from "simba/mysql"

const say = (line: string) => Effect.sync(() => process.stdout.write(`${line}\n`))

const program = Effect.gen(function*() {
  const name = yield* Config.string("LEADER_NAME").pipe(Config.withDefault("example-leader"))
  const log = yield* Config.string("FENCED_LOG").pipe(Config.withDefault("simba-example"))
  const every = yield* Config.integer("WRITE_EVERY_MS").pipe(Config.withDefault(50))
  const sql = yield* SqlClient.SqlClient

  yield* sql`CREATE TABLE IF NOT EXISTS simba_example_fence (resource VARCHAR(64) PRIMARY KEY, token BIGINT NOT NULL)`
  yield* sql`CREATE TABLE IF NOT EXISTS simba_example_log (
    id BIGINT AUTO_INCREMENT PRIMARY KEY, log VARCHAR(64) NOT NULL, token BIGINT NOT NULL, entry VARCHAR(128) NOT NULL)`
  yield* sql`INSERT IGNORE INTO simba_example_fence VALUES (${log}, 0)`

  // The fence row stays locked until the row is written; a higher stored token refuses the write.
  const write = (term: Term.Term, seq: number) =>
    sql.withTransaction(Effect.gen(function*() {
      const [fence] = yield* sql<{ token: string }>`
        SELECT CAST(token AS CHAR) AS token FROM simba_example_fence WHERE resource = ${log} FOR UPDATE`
      if (fence === undefined || BigInt(fence.token) > term.token) return false
      yield* sql`UPDATE simba_example_fence SET token = ${term.token.toString()} WHERE resource = ${log}`
      yield* sql`INSERT INTO simba_example_log (log, token, entry)
        VALUES (${log}, ${term.token.toString()}, ${`${term.token}:${process.pid}:${seq}`})`
      return true
    })).pipe(Effect.flatMap((accepted) => say(`WRITE ${term.token} ${accepted ? "accepted" : "rejected"}`)))

  yield* say(`READY ${process.pid}`)
  yield* Simba.runWhileLeader(name, (term) =>
    Effect.gen(function*() {
      yield* say(`ELECTED ${term.token} ${process.pid}`)
      let seq = 0
      yield* Effect.flatMap(term.ensureValid(), () => write(term, seq++)).pipe(
        Effect.repeat(Schedule.spaced(`${every} millis`))
      )
    }).pipe(
      // Interrupted by the revocation, or failed first (ensureValid on waking from a pause): the term's work is over.
      Effect.ensuring(say(`REVOKED ${term.token} ${process.pid}`))
    ))
})

const LogDatabase = Layer.unwrapEffect(
  Effect.map(
    Config.redacted("SIMBA_MYSQL_URL").pipe(Config.withDefault(Redacted.make("mysql://root@127.0.0.1:3306/test"))),
    (url) => MysqlClient.layer({ url, maxConnections: 2 })
  )
)

program.pipe(Effect.scoped, Effect.provide(Layer.merge(SimbaMysqlLive, LogDatabase)), NodeRuntime.runMain)
