/**
 * The SQL backends against the real databases, beyond the TCK: option checks, migrations run by
 * several starters at once, tokens above 2^53 read exactly, renewals that do not list an unchanged
 * lease set, and (PostgreSQL) hints that resume after the `LISTEN` connection is terminated.
 * Each case uses its own table prefix or unique names, so runs and parallel files never collide.
 */
import * as PgClient from "@effect/sql-pg/PgClient"
import * as MysqlClient from "@effect/sql-mysql2/MysqlClient"
import { SqlClient } from "@effect/sql/SqlClient"
import { describe, expect, it } from "@effect/vitest"
import * as Context from "effect/Context"
import * as Deferred from "effect/Deferred"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Redacted from "effect/Redacted"
import * as Schedule from "effect/Schedule"
import { randomBytes } from "node:crypto"
import { AcquireReply, type Hint, LeaseBackend } from "../../src/LeaseBackend.js"
import * as Migrations from "../../src/layers/sql/migrations.js"
import * as MysqlBackend from "../../src/layers/sql/MysqlBackend.js"
import * as PgBackend from "../../src/layers/sql/PgBackend.js"
import { mysqlUrl, pgUrl } from "./SqlServers.js"
import { granted, heardHints, hintsFlow, live } from "../support/replies.js"

const ttl = Duration.millis(1500)

const unique = (label: string) => `sql-test.${randomBytes(8).toString("hex")}.${label}`

const pgClient = PgClient.layer({ url: Redacted.make(pgUrl), maxConnections: 2 })
const mysqlClient = MysqlClient.layer({ url: Redacted.make(mysqlUrl), maxConnections: 2 })

const dialects = [
  {
    label: "postgres",
    prefix: "simba_t_pgx_",
    layer: (tablePrefix: string) => PgBackend.layer({ url: pgUrl, tablePrefix }),
    raw: pgClient,
    /** Drops the routines whose names start with `start` (`<prefix>v` for every version's). */
    dropRoutines: (start: string) =>
      Effect.gen(function*() {
        const sql = yield* SqlClient
        const functions = yield* sql.unsafe<{ signature: string }>(
          "SELECT p.oid::regprocedure::text AS signature FROM pg_proc p WHERE starts_with(p.proname, $1)",
          [start]
        )
        for (const { signature } of functions) yield* sql.unsafe(`DROP FUNCTION IF EXISTS ${signature}`)
      }),
    dropTables: (prefix: string) =>
      Effect.asVoid(
        Effect.flatMap(SqlClient, (sql) =>
          sql.unsafe(`DROP TABLE IF EXISTS ${prefix}pool_waiter, ${prefix}pool, ${prefix}boot, ${prefix}released, ${prefix}waiter, ${prefix}member, ${prefix}lease, ${prefix}session`))
      ),
    /** What a database of an earlier schema version lacks besides this version's routines. */
    dropNewTables: (prefix: string) =>
      Effect.asVoid(Effect.flatMap(SqlClient, (sql) => sql.unsafe(`DROP TABLE IF EXISTS ${prefix}boot, ${prefix}released`))),
    /** Tokens floored by the database clock in µs (PostgreSQL, since schema version 4), or counted from 1. */
    clockTokens: true,
    version: Migrations.postgresVersion,
    /** URLs the server refuses, and its reason. */
    refused: [
      ["postgres://simba_nosuch_user:pw-not-shown@127.0.0.1:5432/test", `role "simba_nosuch_user" does not exist`],
      ["postgres://postgres@127.0.0.1:5432/simba_nosuch_db", `database "simba_nosuch_db" does not exist`]
    ]
  },
  {
    label: "mysql",
    prefix: "simba_t_myx_",
    layer: (tablePrefix: string) => MysqlBackend.layer({ url: mysqlUrl, tablePrefix }),
    raw: mysqlClient,
    dropRoutines: (start: string) =>
      Effect.gen(function*() {
        const sql = yield* SqlClient
        const procedures = yield* sql.unsafe<{ name: string }>(
          "SELECT ROUTINE_NAME AS name FROM information_schema.ROUTINES WHERE ROUTINE_SCHEMA = DATABASE() AND LEFT(ROUTINE_NAME, CHAR_LENGTH(?)) = ?",
          [start, start]
        )
        for (const { name } of procedures) yield* sql.unsafe(`DROP PROCEDURE IF EXISTS ${name}`).unprepared
      }),
    dropTables: (prefix: string) =>
      Effect.asVoid(
        Effect.flatMap(SqlClient, (sql) =>
          sql.unsafe(`DROP TABLE IF EXISTS ${prefix}member, ${prefix}lease, ${prefix}session`).unprepared)
      ),
    dropNewTables: (_prefix: string) => Effect.void,
    clockTokens: false,
    version: Migrations.mysqlVersion,
    refused: [
      ["mysql://simba_nosuch_user:pw-not-shown@127.0.0.1:3306/test", `Access denied for user 'simba_nosuch_user'@`],
      ["mysql://root@127.0.0.1:3306/simba_nosuch_db", `Unknown database 'simba_nosuch_db'`]
    ]
  }
] as const

for (const dialect of dialects) {
  const dropAll = (prefix: string) => Effect.zipRight(dialect.dropRoutines(`${prefix}v`), dialect.dropTables(prefix))
  /**
   * The token of a name's first grant: 1, or on PostgreSQL the database clock in µs (this machine's
   * clock, read before the grant, less 5 s of slack: same host).
   */
  const expectFirstToken = (token: bigint, before: number) =>
    dialect.clockTokens
      ? expect(token).toBeGreaterThanOrEqual(BigInt(before - 5000) * 1000n)
      : expect(token).toBe(1n)
  describe(`SQL backend (${dialect.label})`, () => {
    it.effect("invalid options fail with SimbaConfigError naming the option, before any connection", () =>
      Effect.gen(function*() {
        const layerOf = dialect.label === "postgres" ? PgBackend.layer : MysqlBackend.layer
        const cases = [
          [{ tablePrefix: "Simba-" }, "tablePrefix"],
          [{ tablePrefix: "" }, "tablePrefix"],
          [{ url: "not a url" }, "url"],
          [{ url: "redis://127.0.0.1:6379" }, "url"],
          [{ maxConnections: 0 }, "maxConnections"]
        ] as const
        for (const [options, option] of cases) {
          const error = yield* Effect.flip(Effect.scoped(Layer.build(layerOf(options))))
          expect(error._tag).toBe("SimbaConfigError")
          if (error._tag === "SimbaConfigError") expect(error.field).toBe(`${dialect.label}.${option}`)
        }
      }))

    it.live("reservedConnections: calls run on that many connections reserved from the application's pool; a bad count is a SimbaConfigError", () =>
      Effect.gen(function*() {
        const withClient = (reservedConnections: number) =>
          dialect.label === "postgres"
            ? PgBackend.layerWithClient({ tablePrefix: dialect.prefix, reservedConnections })
            : MysqlBackend.layerWithClient({ tablePrefix: dialect.prefix, reservedConnections })
        yield* Effect.gen(function*() {
          const b = yield* LeaseBackend
          const sessionId = (yield* b.openSession(ttl)).sessionId
          // More calls at once than reserved connections: they take turns.
          const names = [1, 2, 3, 4, 5].map((i) => unique(`reserved-${i}`))
          const tokens = yield* Effect.forEach(names, (name) => Effect.map(b.acquire(sessionId, name), granted), { concurrency: "unbounded" })
          expect(live(yield* b.keepAlive(sessionId, ttl)).leases).toEqual(
            names.map((name, i) => ({ name, token: tokens[i]! })).sort((a, c) => a.name < c.name ? -1 : 1)
          )
          yield* b.closeSession(sessionId)
        }).pipe(Effect.provide(withClient(1).pipe(Layer.provide(dialect.raw))), Effect.scoped)
        const error = yield* Effect.flip(Effect.scoped(Layer.build(withClient(-1).pipe(Layer.provide(dialect.raw)))))
        if (error._tag !== "SimbaConfigError") expect.fail(`expected SimbaConfigError, got ${error._tag}`)
        expect(error.field).toBe(`${dialect.label}.reservedConnections`)
      }), 30_000)

    it.live("reservedConnections: a call given up while the database still runs it (blocked on a row lock) holds no later call behind it", () =>
      Effect.gen(function*() {
        const backendPool = dialect.label === "postgres"
          ? PgClient.layer({ url: Redacted.make(pgUrl), maxConnections: 3 })
          : MysqlClient.layer({ url: Redacted.make(mysqlUrl), maxConnections: 3 })
        const backendLayer = (dialect.label === "postgres"
          ? PgBackend.layerWithClient({ tablePrefix: dialect.prefix, reservedConnections: 1 })
          : MysqlBackend.layerWithClient({ tablePrefix: dialect.prefix, reservedConnections: 1 })).pipe(Layer.provide(backendPool))
        const b = Context.get(yield* Layer.build(backendLayer), LeaseBackend)
        const raw = Context.get(yield* Layer.build(dialect.raw), SqlClient)
        const blocked = (yield* b.openSession(ttl)).sessionId
        const other = (yield* b.openSession(ttl)).sessionId
        // Another connection holds the first session's row: its renewal waits for the lock.
        const locked = yield* Deferred.make<void>()
        const unlock = yield* Deferred.make<void>()
        yield* raw.withTransaction(Effect.gen(function*() {
          yield* raw.unsafe(`SELECT id FROM ${dialect.prefix}session WHERE id = ${dialect.label === "postgres" ? "$1" : "?"} FOR UPDATE`, [blocked])
          yield* Deferred.succeed(locked, undefined)
          yield* Deferred.await(unlock)
        })).pipe(Effect.forkScoped)
        yield* Deferred.await(locked)
        const renewal = yield* Effect.exit(Effect.timeout(b.keepAlive(blocked, ttl), Duration.millis(300)))
        expect(renewal._tag).toBe("Failure")
        // The only lane was given up; MySQL cannot cancel the statement, which still waits on its
        // connection: the next call must not queue behind it.
        const name = unique("after-blocked")
        const next = yield* Effect.timeout(b.acquire(other, name), Duration.seconds(3))
        granted(next)
        yield* Deferred.succeed(unlock, undefined)
        yield* b.closeSession(other)
        yield* b.closeSession(blocked)
      }).pipe(Effect.scoped), 30_000)

    it.live("a refused connection fails with BackendError(connect) whose first line starts with the server's reason", () =>
      Effect.gen(function*() {
        const layerOf = dialect.label === "postgres" ? PgBackend.layer : MysqlBackend.layer
        for (const [url, reason] of dialect.refused) {
          const error = yield* Effect.flip(Effect.scoped(Layer.build(layerOf({ url }))))
          if (error._tag !== "BackendError") expect.fail(`expected BackendError, got ${error._tag}: ${error.message}`)
          expect(error.operation).toBe("connect")
          expect(error.message.split("\n")[0]).toMatch(new RegExp(`^${dialect.label} connect failed: `))
          expect(error.message.split("\n")[0]!.slice(`${dialect.label} connect failed: `.length).startsWith(reason)).toBe(true)
          expect(error.message).not.toContain("pw-not-shown")
        }
      }), 30_000)

    it.live("migrations started by four processes at once on an empty database all succeed", () =>
      Effect.gen(function*() {
        const prefix = `simba_t_mig${randomBytes(4).toString("hex")}_`
        const starter = Effect.gen(function*() {
          const b = yield* LeaseBackend
          const sessionId = (yield* b.openSession(ttl)).sessionId
          const name = unique("lease")
          const before = Date.now()
          expectFirstToken(granted(yield* b.acquire(sessionId, name)), before)
          yield* b.closeSession(sessionId)
        }).pipe(Effect.provide(dialect.layer(prefix)), Effect.scoped)
        yield* Effect.all([starter, starter, starter, starter], { concurrency: "unbounded" }).pipe(
          Effect.ensuring(Effect.orDie(dropAll(prefix).pipe(Effect.provide(dialect.raw))))
        )
      }), 60_000)

    it.live("on tables of an earlier schema version (this version's routines missing), the migration installs its routines beside and tokens continue", () =>
      Effect.gen(function*() {
        const prefix = `simba_t_ver${randomBytes(4).toString("hex")}_`
        const name = unique("upgraded")
        const acquireRelease = (name: string) => Effect.gen(function*() {
          const b = yield* LeaseBackend
          const sessionId = (yield* b.openSession(ttl)).sessionId
          const token = granted(yield* b.acquire(sessionId, name))
          yield* b.release(sessionId, name, token)
          yield* b.closeSession(sessionId)
          return token
        }).pipe(Effect.provide(dialect.layer(prefix)), Effect.scoped)
        const run = Effect.gen(function*() {
          const before = Date.now()
          const first = yield* acquireRelease(name)
          expectFirstToken(first, before)
          // What an earlier version leaves: the tables with their rows, routines of another version only.
          yield* dialect.dropRoutines(`${prefix}v${dialect.version}_`).pipe(Effect.provide(dialect.raw))
          yield* dialect.dropNewTables(prefix).pipe(Effect.provide(dialect.raw))
          // Several processes upgrading at once, then the name again: its token continues. No
          // lock-delay: the upgrade finds no loss (the earlier version's commits were all durable).
          const fresh = yield* Effect.all([1, 2, 3].map((i) => acquireRelease(`${name}.${i}`)), { concurrency: "unbounded" })
          for (const token of fresh) expectFirstToken(token, before)
          const again = yield* acquireRelease(name)
          if (dialect.clockTokens) expect(again).toBeGreaterThan(first)
          else expect(again).toBe(2n)
        })
        yield* run.pipe(Effect.ensuring(Effect.orDie(dropAll(prefix).pipe(Effect.provide(dialect.raw)))))
      }), 60_000)

    // PostgreSQL only: MySQL's release still bumps the session row's version (counting its releases
    // apart, as PostgreSQL does, measured no faster there: its commits wait for the flush either way).
    if (dialect.label === "postgres") it.live("a release does not write its session's row (an acquire of the session, which does, never waits for one); the renewal after it lists the set again", () =>
      Effect.gen(function*() {
        const b = yield* LeaseBackend
        const sql = yield* SqlClient
        const [released, kept] = [unique("release-row"), unique("release-kept")]
        const sessionId = (yield* b.openSession(ttl)).sessionId
        const token = granted(yield* b.acquire(sessionId, released))
        const keptToken = granted(yield* b.acquire(sessionId, kept))
        const before = live(yield* b.keepAlive(sessionId, ttl)).version
        // Another transaction holds the session row's lock, as a caller's next acquire would.
        const [rowLocked, done] = [yield* Deferred.make<void>(), yield* Deferred.make<void>()]
        const holder = yield* Effect.fork(sql.withTransaction(Effect.gen(function*() {
          yield* sql.unsafe(`SELECT id FROM ${dialect.prefix}session WHERE id = '${sessionId}' FOR UPDATE`)
          yield* Deferred.succeed(rowLocked, undefined)
          yield* Deferred.await(done)
        })))
        yield* Deferred.await(rowLocked)
        // Before schema version 7 this waited for the transaction above.
        const release = yield* b.release(sessionId, released, token).pipe(Effect.timeout("5 seconds"), Effect.either)
        yield* Deferred.succeed(done, undefined)
        yield* Effect.orDie(holder.await)
        expect(release._tag).toBe("Right")
        const after = live(yield* b.keepAlive(sessionId, ttl, before))
        expect(after.version).not.toBe(before)
        expect(after.leases).toEqual([{ name: kept, token: keptToken }])
        const unchanged = live(yield* b.keepAlive(sessionId, ttl, after.version))
        expect(unchanged.version).toBe(after.version)
        expect(unchanged.leases).toBeUndefined()
        yield* b.closeSession(sessionId)
      }).pipe(Effect.provide(Layer.merge(dialect.layer(dialect.prefix), dialect.raw)), Effect.scoped), 30_000)

    it.live("tokens above 2^53 are read exactly, as bigint", () =>
      Effect.gen(function*() {
        const b = yield* LeaseBackend
        const sql = yield* SqlClient
        const name = unique("big")
        const sessionId = (yield* b.openSession(ttl)).sessionId
        const first = granted(yield* b.acquire(sessionId, name))
        yield* b.release(sessionId, name, first)
        const big = 2n ** 60n + 7n
        yield* sql.unsafe(`UPDATE ${dialect.prefix}lease SET token = ${big} WHERE name = '${name}'`)
        const token = granted(yield* b.acquire(sessionId, name))
        expect(token).toBe(big + 1n)
        expect(live(yield* b.keepAlive(sessionId, ttl)).leases).toEqual([{ name, token: big + 1n }])
        yield* b.closeSession(sessionId)
      }).pipe(Effect.provide(Layer.merge(dialect.layer(dialect.prefix), dialect.raw)), Effect.scoped))

    it.live("a grant reserving a block: its token is the block's last (a first row too), the holder asking again gets no new block, the next grant is above it", () =>
      Effect.gen(function*() {
        const b = yield* LeaseBackend
        const [fresh, used] = [unique("block-fresh"), unique("block-used")]
        const sessionId = (yield* b.openSession(ttl)).sessionId
        const before = granted(yield* b.acquire(sessionId, used))
        yield* b.release(sessionId, used, before)
        for (const [name, above] of [[fresh, 0n], [used, before]] as const) {
          const reply = yield* b.acquire(sessionId, name, 16)
          expect(reply).toMatchObject({ _tag: "Granted", reserved: 16 })
          const token = granted(reply)
          expect(token - 15n).toBeGreaterThan(above)
          const again = yield* b.acquire(sessionId, name, 16)
          expect(again).toEqual(AcquireReply.Granted({ token }))
          yield* b.release(sessionId, name, token)
          const next = granted(yield* b.acquire(sessionId, name))
          expect(next).toBeGreaterThan(token)
          yield* b.release(sessionId, name, next)
        }
        yield* b.closeSession(sessionId)
      }).pipe(Effect.provide(Layer.merge(dialect.layer(dialect.prefix), dialect.raw)), Effect.scoped))

    it.live("a renewal naming the current version of 200 held leases lists none of them and renews the session", () =>
      Effect.gen(function*() {
        const b = yield* LeaseBackend
        const sessionId = (yield* b.openSession(ttl)).sessionId
        const prefix = unique("many")
        yield* Effect.forEach(
          Array.from({ length: 200 }, (_, i) => `${prefix}.${i}`),
          (name) => Effect.map(b.acquire(sessionId, name), granted),
          { concurrency: 4, discard: true }
        )
        const first = live(yield* b.keepAlive(sessionId, ttl))
        expect(first.leases).toHaveLength(200)
        const again = live(yield* b.keepAlive(sessionId, ttl, first.version))
        expect(again.leases).toBeUndefined()
        expect(again.version).toBe(first.version)
        expect(Duration.toMillis(again.remaining)).toBe(Duration.toMillis(ttl))
        yield* b.closeSession(sessionId)
      }).pipe(Effect.provide(dialect.layer(dialect.prefix)), Effect.scoped), 30_000)
  })
}


describe("SQL backend (postgres): hints", () => {
  it.live("after the LISTEN connection is terminated, hints resume, and every refused name is hinted on reconnect", () =>
    Effect.gen(function*() {
      const b = yield* LeaseBackend
      const sql = yield* SqlClient
      const { waitFor } = yield* heardHints
      const released = (name: string) => (hint: Hint) => hint._tag === "Released" && hint.name === name
      const holder = (yield* b.openSession(ttl)).sessionId
      const waiter = (yield* b.openSession(ttl)).sessionId
      yield* hintsFlow(waitFor, () => unique("warm-up"), ttl)

      const [waited, after] = [unique("waited"), unique("after")]
      granted(yield* b.acquire(holder, waited))
      expect((yield* b.acquire(waiter, waited))._tag).toBe("HeldBy")
      const terminated = yield* sql.unsafe<{ terminated: boolean }>(
        `SELECT pg_terminate_backend(pid) AS terminated FROM pg_stat_activity
         WHERE query = 'LISTEN "simba_t_pgx_hints"' AND pid <> pg_backend_pid()`
      )
      expect(terminated.length).toBeGreaterThanOrEqual(1)
      // On reconnecting, the listener hints the name a local candidate was refused (it may have
      // missed its release while disconnected), without any release happening.
      yield* waitFor(released(waited))
      // And notifications flow again.
      yield* hintsFlow(waitFor, () => after, ttl)
      yield* b.closeSession(holder)
      yield* b.closeSession(waiter)
    }).pipe(Effect.provide(Layer.merge(PgBackend.layer({ url: pgUrl, tablePrefix: "simba_t_pgx_" }), pgClient)), Effect.scoped), 30_000)

  it.live("a release with nobody queued notifies nothing; a closed session notifies each lease it held", () =>
    Effect.gen(function*() {
      const b = yield* LeaseBackend
      const { seen, waitFor } = yield* heardHints
      const released = (name: string) => (hint: Hint) => hint._tag === "Released" && hint.name === name
      yield* hintsFlow(waitFor, () => unique("warm-up"), ttl)
      const sid = (yield* b.openSession(ttl)).sessionId
      const [quiet, closed] = [unique("quiet"), unique("closed")]
      yield* b.release(sid, quiet, granted(yield* b.acquire(sid, quiet)))
      granted(yield* b.acquire(sid, closed))
      yield* b.closeSession(sid)
      // One channel, delivered in commit order: once the close's hint is here, the release's would be.
      yield* waitFor(released(closed))
      expect((yield* seen).some(released(quiet))).toBe(false)
    }).pipe(Effect.provide(Layer.merge(PgBackend.layer({ url: pgUrl, tablePrefix: "simba_t_pgx_" }), pgClient)), Effect.scoped), 30_000)

  it.live("a session refused a lease whose grant reserved a block tells its holder (w:<holder>:<name>); a grant of one token does not", () =>
    Effect.gen(function*() {
      const b = yield* LeaseBackend
      const { seen, waitFor } = yield* heardHints
      const holder = (yield* b.openSession(ttl)).sessionId
      const waiter = (yield* b.openSession(ttl)).sessionId
      const [cached, plain] = [unique("cached"), unique("plain")]
      const reply = yield* b.acquire(holder, cached, 16)
      expect(reply).toMatchObject({ _tag: "Granted", reserved: 16 })
      granted(yield* b.acquire(holder, plain))
      const wanted = (name: string) => (hint: Hint) => hint._tag === "Wanted" && hint.name === name && hint.holder === holder
      // Refused (and queued) behind both: the listener may take a moment to be up, so ask again until heard.
      yield* Effect.gen(function*() {
        expect((yield* b.acquire(waiter, cached))._tag).toBe("HeldBy")
        expect((yield* b.acquire(waiter, plain))._tag).toBe("HeldBy")
        yield* waitFor(wanted(cached), "300 millis")
      }).pipe(Effect.retry(Schedule.recurs(15)))
      expect((yield* seen).some(wanted(plain))).toBe(false)
      yield* b.closeSession(holder)
      yield* b.closeSession(waiter)
    }).pipe(Effect.provide(Layer.merge(PgBackend.layer({ url: pgUrl, tablePrefix: "simba_t_pgx_" }), pgClient)), Effect.scoped), 30_000)
})

describe("SQL backend (postgres): timeouts", () => {
  it.live("calls interrupted while blocked on a row lock are cancelled on the server and do not wedge the pool", () =>
    Effect.gen(function*() {
      const b = yield* LeaseBackend
      const sql = yield* SqlClient
      const blocked = (yield* b.openSession(ttl)).sessionId
      const other = (yield* b.openSession(ttl)).sessionId
      yield* Effect.scoped(Effect.gen(function*() {
        // Another transaction holds the blocked session's row.
        const conn = yield* sql.reserve
        yield* conn.executeRaw("BEGIN", [])
        yield* conn.executeRaw("SELECT 1 FROM simba_t_pgx_session WHERE id = $1 FOR UPDATE", [blocked])
        // More interrupted calls than the pool has connections (2).
        for (let i = 0; i < 4; i++) {
          const result = yield* Effect.either(Effect.timeout(b.keepAlive(blocked, ttl), Duration.millis(100)))
          expect(result._tag).toBe("Left")
        }
        // The pool still serves other sessions at once.
        const start = performance.now()
        live(yield* b.keepAlive(other, ttl))
        expect(performance.now() - start).toBeLessThan(1000)
        // No cancelled call is still waiting on the server (the cancel signal is handled asynchronously:
        // allow it up to 2 s).
        const waiting = sql.unsafe<{ n: string }>(
          `SELECT count(*)::text AS n FROM pg_stat_activity WHERE query LIKE '%simba_t_pgx_v${Migrations.postgresVersion}_keep_alive%' AND state = 'active' AND pid <> pg_backend_pid()`
        ).pipe(Effect.map((rows) => rows[0]?.n))
        let left = yield* waiting
        for (let i = 0; i < 40 && left !== "0"; i++) {
          yield* Effect.sleep(Duration.millis(50))
          left = yield* waiting
        }
        expect(left).toBe("0")
        yield* conn.executeRaw("ROLLBACK", [])
      }))
      live(yield* b.keepAlive(blocked, ttl))
      yield* b.closeSession(blocked)
      yield* b.closeSession(other)
    }).pipe(
      Effect.provide(Layer.merge(PgBackend.layer({ url: pgUrl, tablePrefix: "simba_t_pgx_", maxConnections: 2 }), pgClient)),
      Effect.scoped
    ), 30_000)
})

describe("SQL backend: layerWithClient", () => {
  it.live("the application's SqlClient outlives the backend built on it (Simba never closes it)", () =>
    Effect.gen(function*() {
      for (const [fromClient, rawClient] of [
        [PgBackend.layerWithClient({ tablePrefix: "simba_t_pgx_" }), pgClient],
        [MysqlBackend.layerWithClient({ tablePrefix: "simba_t_myx_" }), mysqlClient]
      ] as const) {
        yield* Effect.gen(function*() {
          const sql = yield* SqlClient
          yield* Effect.scoped(Effect.gen(function*() {
            const b = Context.get(yield* Layer.build(fromClient), LeaseBackend)
            const sessionId = (yield* b.openSession(ttl)).sessionId
            yield* b.closeSession(sessionId)
          }))
          // The backend's scope is closed; the application's pool still answers.
          const rows = yield* sql<{ one: number }>`SELECT 1 AS one`
          expect(Number(rows[0]!.one)).toBe(1)
        }).pipe(Effect.provide(rawClient), Effect.scoped)
      }
    }), 30_000)

  it.live("PostgreSQL: on a PgClient configured by host and port, hints arrive", () =>
    Effect.gen(function*() {
      const { waitFor } = yield* heardHints
      yield* hintsFlow(waitFor, () => unique("from-client"), ttl)
    }).pipe(
      Effect.provide(
        PgBackend.layerWithClient({ tablePrefix: "simba_t_pgx_" }).pipe(
          Layer.provide(PgClient.layer({ host: "127.0.0.1", port: 5432, database: "test", username: "postgres" }))
        )
      ),
      Effect.scoped
    ), 30_000)

  it.live("MySQL: on the application's MysqlClient", () =>
    Effect.gen(function*() {
      const b = yield* LeaseBackend
      const sessionId = (yield* b.openSession(ttl)).sessionId
      const name = unique("from-client")
      const token = granted(yield* b.acquire(sessionId, name))
      expect(live(yield* b.keepAlive(sessionId, ttl)).leases).toEqual([{ name, token }])
      yield* b.closeSession(sessionId)
    }).pipe(
      Effect.provide(MysqlBackend.layerWithClient({ tablePrefix: "simba_t_myx_" }).pipe(Layer.provide(mysqlClient))),
      Effect.scoped
    ), 30_000)
})
