/**
 * One chaos process: `node --import tsx test/chaos/leader.ts <backend>` with backend `redis`,
 * `cluster`, `pg`, `mysql` or `zookeeper` (the SIMBA_* environment points it at the server, usually
 * through a proxy of the suite). It runs `Simba.runWhileLeader(CHAOS_NAME, work)`; the work writes
 * every WRITE_EVERY_MS through a fenced helper of src/fencing/ on a store that no fault touches:
 *
 * - CHAOS_FENCE=redis: `FencedRedis.set` on the Redis at CHAOS_FENCE_REDIS_URL (a private server);
 * - CHAOS_FENCE=sql: `FencedSql.write` on the PostgreSQL at CHAOS_FENCE_PG_URL, appending a row to
 *   `simba_chaos_log` (so the order the database applied the writes can be read back).
 *
 * It prints one JSON object per line. Times are milliseconds on CLOCK_MONOTONIC (`process.hrtime`),
 * shared by every process of the machine, so intervals of different processes compare directly;
 * they are for the report only (Simba decides with its own `Clock`).
 *   {"ev":"ready","pid"}
 *   {"ev":"start","tok","mono","wall"}              a term's work begins
 *   {"ev":"w","tok","at","end","r"}                  one write: `at` taken before `term.ensureValid()`,
 *                                                    r = ok | refused | expired | error
 *   {"ev":"end","tok","mono","wall"}                 the work ended (interrupted or failed)
 *   {"ev":"fatal","message"}                         the program failed (then exit 1)
 */
import { NodeRuntime } from "@effect/platform-node"
import { SqlClient } from "@effect/sql"
import { PgClient } from "@effect/sql-pg"
import { Cause, Config, Context, Effect, Layer, Schedule } from "effect"
import { Redis } from "ioredis"
import { Simba, type Term } from "simba"
import { SimbaMysqlLive } from "simba/mysql"
import { SimbaPgLive } from "simba/postgres"
import { SimbaRedisLive } from "simba/redis"
import { SimbaZookeeperLive } from "simba/zookeeper"
import * as FencedRedis from "../../src/fencing/FencedRedis.js"
import * as FencedSql from "../../src/fencing/FencedSql.js"

const mono = () => Number(process.hrtime.bigint()) / 1e6
const say = (fields: Record<string, unknown>) =>
  Effect.sync(() => process.stdout.write(`${JSON.stringify({ ...fields, pid: process.pid })}\n`))

const backends = {
  redis: SimbaRedisLive,
  cluster: SimbaRedisLive,
  pg: SimbaPgLive,
  mysql: SimbaMysqlLive,
  zookeeper: SimbaZookeeperLive
} as const
const backend = process.argv[2] as keyof typeof backends
if (!(backend in backends)) {
  process.stderr.write(`usage: leader.ts ${Object.keys(backends).join("|")}\n`)
  process.exit(2)
}

type Outcome = "ok" | "refused" | "error"

/** The fenced write of one term, by store. */
const redisWriter = Effect.gen(function*() {
  const url = yield* Config.string("CHAOS_FENCE_REDIS_URL")
  const key = yield* Config.string("CHAOS_FENCE_KEY")
  const redis = yield* Effect.acquireRelease(
    Effect.sync(() => new Redis(url, { maxRetriesPerRequest: 1 })),
    (client) => Effect.sync(() => client.disconnect())
  )
  return (term: Term.Term, seq: number): Effect.Effect<Outcome> =>
    FencedRedis.set(redis, key, term, `${term.token}:${process.pid}:${seq}`).pipe(
      Effect.as<Outcome>("ok"),
      Effect.catchTags({
        FencedWriteRejectedError: () => Effect.succeed<Outcome>("refused"),
        FencedStoreError: () => Effect.succeed<Outcome>("error"),
        InvalidFenceError: () => Effect.succeed<Outcome>("error")
      })
    )
})

const sqlWriter = Effect.gen(function*() {
  const resource = yield* Config.string("CHAOS_FENCE_KEY")
  const url = yield* Config.redacted("CHAOS_FENCE_PG_URL")
  // A pool of its own, open as long as the program's scope.
  const context = yield* Layer.build(PgClient.layer({ url, maxConnections: 2 }))
  const sql = Context.get(context, SqlClient.SqlClient)
  const options = { table: "simba_chaos_fence" }
  yield* FencedSql.ensureTable(options).pipe(Effect.provideService(SqlClient.SqlClient, sql))
  yield* sql.withTransaction(
    sql`SELECT pg_advisory_xact_lock(hashtext('simba_chaos_log'))`.pipe(Effect.zipRight(sql`
      CREATE TABLE IF NOT EXISTS simba_chaos_log (
        id BIGSERIAL PRIMARY KEY, resource TEXT NOT NULL, token BIGINT NOT NULL, pid INT NOT NULL, seq INT NOT NULL)`))
  )
  return (term: Term.Term, seq: number): Effect.Effect<Outcome> =>
    sql`INSERT INTO simba_chaos_log (resource, token, pid, seq)
        VALUES (${resource}, CAST(${term.token.toString()} AS BIGINT), ${process.pid}, ${seq})`.pipe(
      FencedSql.write(resource, term, options),
      Effect.provideService(SqlClient.SqlClient, sql),
      Effect.as<Outcome>("ok"),
      Effect.catchTags({
        FencedWriteRejectedError: () => Effect.succeed<Outcome>("refused"),
        SqlError: () => Effect.succeed<Outcome>("error"),
        InvalidFenceError: () => Effect.succeed<Outcome>("error")
      })
    )
})

const program = Effect.gen(function*() {
  const name = yield* Config.string("CHAOS_NAME")
  const every = yield* Config.integer("WRITE_EVERY_MS").pipe(Config.withDefault(20))
  const store = yield* Config.literal("redis", "sql")("CHAOS_FENCE")
  const write = store === "redis" ? yield* redisWriter : yield* Effect.orDie(sqlWriter)
  yield* say({ ev: "ready" })
  yield* Simba.runWhileLeader(name, (term) =>
    Effect.gen(function*() {
      yield* say({ ev: "start", tok: String(term.token), mono: mono(), wall: Date.now() })
      let seq = 0
      const once = Effect.gen(function*() {
        const at = mono()
        const valid = yield* Effect.either(term.ensureValid())
        if (valid._tag === "Left") {
          yield* say({ ev: "w", tok: String(term.token), at, end: mono(), r: "expired" })
          return yield* valid.left
        }
        const r = yield* write(term, seq++)
        yield* say({ ev: "w", tok: String(term.token), at, end: mono(), r })
      })
      yield* once.pipe(Effect.repeat(Schedule.spaced(`${every} millis`)))
    }).pipe(Effect.ensuring(say({ ev: "end", tok: String(term.token), mono: mono(), wall: Date.now() }))))
})

program.pipe(
  Effect.scoped,
  Effect.provide(backends[backend]),
  Effect.catchAllCause((cause) =>
    Cause.isInterruptedOnly(cause)
      ? Effect.void
      : say({ ev: "fatal", message: Cause.pretty(cause).split("\n")[0] }).pipe(
        Effect.zipRight(Effect.sync(() => process.exit(1)))
      )
  ),
  NodeRuntime.runMain
)
