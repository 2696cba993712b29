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
 * With CHAOS_LOCK_KEEP (a duration) it takes `Simba.withLock(CHAOS_NAME, body, { keep })` again and
 * again instead: each body is a term of its own (a cached lease's bodies take tokens of its block)
 * that writes LOCK_WRITES times, every WRITE_EVERY_MS, then pauses (briefly or up to LOCK_PAUSE_MS); another
 * process asking is handed the lease when the holder's body ends. The same lines, one start/end pair
 * per body.
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
import { Cause, Config, ConfigError, Context, Duration, Effect, Either, Layer, Random, Schedule } from "effect"
import { Redis } from "ioredis"
import { Simba, type Term } from "simba"
import { SimbaMysqlLive } from "simba/mysql"
import { SimbaPgLive } from "simba/postgres"
import { SimbaRedisLive } from "simba/redis"
import { SimbaZookeeperLive } from "simba/zookeeper"
import * as FencedRedis from "../../src/fencing/FencedRedis.js"
import * as FencedSql from "../../src/fencing/FencedSql.js"
import * as SimbaConfig from "../../src/SimbaConfig.js"

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
  // Written as the project's durations are (`200ms`, `1.5s`).
  const keep = yield* Config.option(Config.mapOrFail(Config.string("CHAOS_LOCK_KEEP"), (text) =>
    Either.mapLeft(SimbaConfig.parseDuration(text), (rule) => ConfigError.InvalidData([], rule))))
  const lockWrites = yield* Config.integer("LOCK_WRITES").pipe(Config.withDefault(5))
  const write = store === "redis" ? yield* redisWriter : yield* Effect.orDie(sqlWriter)
  yield* say({ ev: "ready" })
  let seq = 0
  /** One term's writes (`times` of them, or forever), each after `term.ensureValid()`. */
  const work = (term: Term.Term, times: number | undefined) =>
    Effect.gen(function*() {
      yield* say({ ev: "start", tok: String(term.token), mono: mono(), wall: Date.now() })
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
      const spaced = Schedule.spaced(`${every} millis`)
      yield* times === undefined ? once.pipe(Effect.repeat(spaced)) : once.pipe(Effect.repeat({ schedule: spaced, times: times - 1 }))
    }).pipe(Effect.ensuring(say({ ev: "end", tok: String(term.token), mono: mono(), wall: Date.now() })))
  if (keep._tag === "None") return yield* Simba.runWhileLeader(name, (term) => work(term, undefined))
  // A lost term or a failed write ends the body; the loop takes the lock again after a pause: half the
  // time a short one (within keep: its lease is still cached, taken again from its block unless
  // another process asked meanwhile), else one of up to LOCK_PAUSE_MS (others take it meanwhile).
  const pause = yield* Config.integer("LOCK_PAUSE_MS").pipe(Config.withDefault(1500))
  const pauseMs = Effect.flatMap(Random.nextBoolean, (short) => Random.nextIntBetween(0, short ? 50 : pause + 1))
  yield* Simba.withLock(name, (term) => work(term, lockWrites), { keep: Duration.millis(keep.value) }).pipe(
    Effect.ignore,
    Effect.zipRight(Effect.flatMap(pauseMs, (ms) => Effect.sleep(`${ms} millis`))),
    Effect.forever
  )
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
