/**
 * A leader-only job on PostgreSQL: run several copies, exactly one leads at a time.
 *
 *   npx tsx examples/pg-leader.ts        (SIMBA_PG_URL defaults to postgres://127.0.0.1:5432/postgres)
 *
 * The leases live in the tables `simba_session`, `simba_lease`, `simba_member` (created on start).
 * While it leads, the job appends token-stamped rows to a *fenced* log in the same database: one
 * statement raises the fence row of the log to the writer's token only if no higher token was
 * written, and inserts the row only then, so a paused or partitioned ex-leader can never interleave
 * its writes with the new leader's. Ctrl-C (SIGINT) or SIGTERM stops it gracefully: the job is
 * interrupted first, then the lease is released and the next leader starts at once (the release is
 * pushed by `NOTIFY`). The multi-process test (test/sql/multiprocess.test.ts) runs three copies and
 * kills them.
 *
 * Environment: LEADER_NAME (default `example-leader`), FENCED_LOG (fence key, default
 * `simba-example`), WRITE_EVERY_MS (default 50), SIMBA_PG_URL, SIMBA_PG_TABLE_PREFIX and the SIMBA_*
 * timing settings.
 */
import { NodeRuntime } from "@effect/platform-node"
import { SqlClient } from "@effect/sql"
import { PgClient } from "@effect/sql-pg"
import { Config, Effect, Layer, Redacted, Schedule } from "effect"
import { Simba, type Term } from "simba"
import { SimbaPgLive } from "simba/postgres"

const say = (line: string) => Effect.sync(() => process.stdout.write(`${line}\n`))

const program = Effect.gen(function*() {
  const name = yield* Config.string("LEADER_NAME").pipe(Config.withDefault("example-leader"))
  const log = yield* Config.string("FENCED_LOG").pipe(Config.withDefault("simba-example"))
  const every = yield* Config.integer("WRITE_EVERY_MS").pipe(Config.withDefault(50))
  const sql = yield* SqlClient.SqlClient

  // Copies started together on a new database would race on CREATE TABLE IF NOT EXISTS (PostgreSQL
  // answers one of them with a duplicate key in pg_type): they take turns under a transaction lock.
  yield* sql.withTransaction(Effect.gen(function*() {
    yield* sql`SELECT pg_advisory_xact_lock(hashtext('simba_example_tables'))`
    yield* sql`CREATE TABLE IF NOT EXISTS simba_example_fence (log text PRIMARY KEY, token bigint NOT NULL)`
    yield* sql`CREATE TABLE IF NOT EXISTS simba_example_log (
      id bigserial PRIMARY KEY, log text NOT NULL, token bigint NOT NULL, entry text NOT NULL)`
  }))
  yield* sql`INSERT INTO simba_example_fence (log, token) VALUES (${log}, 0) ON CONFLICT DO NOTHING`

  // One statement: the fence row is locked and raised only if no higher token was written.
  const write = (term: Term.Term, seq: number) =>
    sql<{ token: string }>`
      WITH fence AS (
        UPDATE simba_example_fence SET token = ${term.token.toString()}
        WHERE log = ${log} AND token <= ${term.token.toString()} RETURNING token
      )
      INSERT INTO simba_example_log (log, token, entry)
      SELECT ${log}, token, ${`${term.token}:${process.pid}:${seq}`} FROM fence RETURNING token`.pipe(
      Effect.flatMap((rows) => say(`WRITE ${term.token} ${rows.length === 1 ? "accepted" : "rejected"}`))
    )

  yield* say(`READY ${process.pid}`)
  yield* Simba.runWhileLeader(name, (term) =>
    Effect.gen(function*() {
      yield* say(`ELECTED ${term.token} ${process.pid}`)
      let seq = 0
      // Check the term before every write: a paused process reads isValid = false on waking.
      yield* Effect.flatMap(term.ensureValid(), () => write(term, seq++)).pipe(
        Effect.repeat(Schedule.spaced(`${every} millis`))
      )
    }).pipe(
      // Interrupted by the revocation, or failed first (ensureValid on waking from a pause): the term's work is over.
      Effect.ensuring(say(`REVOKED ${term.token} ${process.pid}`))
    ))
})

// The example's own connection for the fenced log, to the same database as the leases.
const LogDatabase = Layer.unwrapEffect(
  Effect.map(
    Config.redacted("SIMBA_PG_URL").pipe(Config.withDefault(Redacted.make("postgres://127.0.0.1:5432/postgres"))),
    (url) => PgClient.layer({ url, maxConnections: 2 })
  )
)

program.pipe(Effect.scoped, Effect.provide(Layer.merge(SimbaPgLive, LogDatabase)), NodeRuntime.runMain)
