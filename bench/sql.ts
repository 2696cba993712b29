/**
 * The SQL sections of the benchmark (PostgreSQL at `BENCH_PG_URL`, default
 * postgres://postgres@127.0.0.1:5432/test; MariaDB/MySQL at `BENCH_MYSQL_URL`, default
 * mysql://root@127.0.0.1:3306/test), run by `npm run bench` after the Redis sections, or alone:
 * `npx tsx bench/sql.ts`. Prints a table and writes
 * `bench/results-sql.json`: `{ bench, metric, unit, postgres, mysql, peerPostgres, peerMysql }`.
 * `npx tsx bench/sql.ts --only uncontended,handover` runs those sections only (floor, uncontended,
 * handover, renew, failover) and writes no file; the sections left out print `—`.
 *
 * Per database, in one process, tables under the prefix `simba_bench_`:
 * - floor: `SELECT 1` through the same `@effect/sql` client, median of 1,000;
 * - uncontended: `withLock` on a fresh name (Simba client, lease 3 s), median of 500 after `WARMUP`
 *   (4,000) warm-up runs, as every series of the pair here (see `WARMUP` in `util.ts`); the backend alone (acquire + release): latency, process CPU time and round trips;
 *   beside it the raw advisory-lock pair on one reserved connection (PostgreSQL `pg_advisory_lock` +
 *   `pg_advisory_unlock`, which is what the `advisory-lock` package sends; MySQL `GET_LOCK` +
 *   `RELEASE_LOCK`), and the durable floor of any acquire + release that survives a crash: two
 *   one-row `UPDATE` commits on the same reserved connection (each waits for its log flush); and
 *   the floor of `withLock`, whose release is not awaited: one commit sent right behind another's on
 *   a second connection (`commitBehindFloor`; PostgreSQL without the flush, as Simba commits);
 *   on PostgreSQL also Simba's own acquire and release routines on two such connections with no
 *   client, the release not awaited (`routinesFloorOn`): what the protocol costs without the client;
 * - handover: a holder (its own backend: pool and LISTEN connection) releases while a waiter (another
 *   backend) waits 10–40 ms; release → waiter holds, 30 runs; the waiter's queries per handover and
 *   per second of a 2 s wait, counted on its `SqlClient` (acquires, renewals, MySQL polls; renewals
 *   also apart); on PostgreSQL beside it the floor: after the same idle, one `UPDATE` + `pg_notify`
 *   commit until a `LISTEN` connection hears it, 30 runs durable and 30 without the flush;
 * - renew: a client holding 1,000 leases: its queries per renew interval over 3 s; an unchanged
 *   renewal's latency and the rows it touches, read from `pg_stat_xact_user_tables` /
 *   `SHOW SESSION STATUS LIKE 'Handler_%'` around one direct call of the routine;
 * - failover: the holder freezes (every backend call hangs, as a process stopped by `kill -9` or
 *   SIGSTOP), at a random phase of its renewals; freeze → waiter holds, 4 runs, lease 2 s.
 */
import type { SqlClient as SqlClientService } from "@effect/sql/SqlClient"
import { SqlClient } from "@effect/sql/SqlClient"
import type { Connection } from "@effect/sql/SqlConnection"
import * as MysqlClient from "@effect/sql-mysql2/MysqlClient"
import * as PgClient from "@effect/sql-pg/PgClient"
import * as Deferred from "effect/Deferred"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Exit from "effect/Exit"
import * as Fiber from "effect/Fiber"
import * as Layer from "effect/Layer"
import * as Redacted from "effect/Redacted"
import * as Queue from "effect/Queue"
import * as Ref from "effect/Ref"
import * as Scope from "effect/Scope"
import * as Stream from "effect/Stream"
import { writeFileSync } from "node:fs"
import { fileURLToPath } from "node:url"
import { BackendError, LeaseBackend, type LeaseBackendService } from "../src/LeaseBackend.js"
import * as Migrations from "../src/layers/sql/migrations.js"
import * as MysqlBackend from "../src/layers/sql/MysqlBackend.js"
import * as PgBackend from "../src/layers/sql/PgBackend.js"
import { pgCallOf } from "../src/layers/sql/SqlBackend.js"
import * as Simba from "../src/Simba.js"
import type { SimbaClient } from "../src/Simba.js"
import { median, now, percentile, randomHex, sleep, WARMUP, waitBeforeRelease } from "./util.js"
import { dropMysqlPrefix, dropPostgresPrefix } from "../test/support/freshSchemas.js"
import type { SqlRow } from "./rows.js"

const pgUrl = process.env["BENCH_PG_URL"] ?? "postgres://postgres@127.0.0.1:5432/test"
const mysqlUrl = process.env["BENCH_MYSQL_URL"] ?? "mysql://root@127.0.0.1:3306/test"
const prefix = "simba_bench_"
const settings = { leaseDuration: "3 seconds" } as const

const sections = ["floor", "uncontended", "handover", "renew", "failover"] as const
type Section = (typeof sections)[number]
/** The sections `--only a,b` asks for (all without it). */
const chosen = (argv: ReadonlyArray<string>): ReadonlySet<Section> => {
  const at = argv.indexOf("--only")
  if (at < 0) return new Set(sections)
  const names = (argv[at + 1] ?? "").split(",")
  const unknown = names.filter((name) => !(sections as ReadonlyArray<string>).includes(name))
  if (unknown.length > 0) throw new Error(`unknown section(s) ${unknown.join(", ")}; known: ${sections.join(", ")}`)
  return new Set(names as ReadonlyArray<Section>)
}

type Db = "postgres" | "mysql"

type Row = SqlRow

/**
 * Counts the queries a backend sends: wraps `unsafe` of the client and of its `withoutTransforms()`;
 * renewals (the `keep_alive` routine) also in `renewals`.
 */
const counting = (sql: SqlClientService, count: Ref.Ref<number>, renewals?: Ref.Ref<number>): SqlClientService => {
  const counted = (text: string) => {
    Effect.runSync(Ref.update(count, (n) => n + 1))
    if (renewals !== undefined && text.includes("keep_alive")) Effect.runSync(Ref.update(renewals, (n) => n + 1))
  }
  // A reserved connection (the backend's lanes, see src/layers/sql/lanes.ts): its statements counted too.
  const countingConnection = (connection: Connection): Connection =>
    new Proxy(connection, {
      get(t, property, receiver) {
        if (property === "execute") {
          return (text: string, params: ReadonlyArray<unknown>, transform: undefined) => {
            counted(text)
            return t.execute(text, params, transform)
          }
        }
        const value: unknown = Reflect.get(t, property, receiver)
        return typeof value === "function" ? value.bind(t) : value
      }
    })
  const wrap = (target: SqlClientService): SqlClientService =>
    new Proxy(target, {
      get(t, property, receiver) {
        if (property === "unsafe") {
          return (text: string, params?: ReadonlyArray<unknown>) => {
            counted(text)
            return t.unsafe(text, params)
          }
        }
        if (property === "reserve") return Effect.map(t.reserve, countingConnection)
        if (property === "withoutTransforms") return () => wrap(t.withoutTransforms())
        const value: unknown = Reflect.get(t, property, receiver)
        return typeof value === "function" ? value.bind(t) : value
      }
    })
  return wrap(sql)
}

/** A backend with a pool (and PG LISTEN connection) of its own, its queries counted. */
const backendOf = (db: Db, count: Ref.Ref<number>, renewals?: Ref.Ref<number>): Effect.Effect<LeaseBackendService, unknown, Scope.Scope> =>
  Effect.gen(function*() {
    const client = db === "postgres"
      ? PgClient.layer({ url: Redacted.make(pgUrl), maxConnections: 4 })
      : MysqlClient.layer({ url: Redacted.make(mysqlUrl), maxConnections: 4 })
    const context = yield* Layer.build(client)
    const sql = counting(context.unsafeMap.get(SqlClient.key) as SqlClientService, count, renewals)
    // As `PgBackend.layer` / `MysqlBackend.layer` run on a pool of their own of 4: 3 connections reserved.
    return db === "postgres"
      ? yield* PgBackend.makeWithClient(sql, { tablePrefix: prefix, listenUrl: pgUrl, reservedConnections: 3 })
      : yield* MysqlBackend.makeWithClient(sql, { tablePrefix: prefix, reservedConnections: 3 })
  })

const clientOn = (backend: LeaseBackendService, input: Parameters<typeof Simba.make>[0] = settings) =>
  Simba.make(input).pipe(Effect.provideService(LeaseBackend, backend))

const rawClient = (db: Db) =>
  db === "postgres"
    ? PgClient.layer({ url: Redacted.make(pgUrl), maxConnections: 2 })
    : MysqlClient.layer({ url: Redacted.make(mysqlUrl), maxConnections: 2 })

const timed = (n: number, op: (i: number) => Effect.Effect<unknown, unknown>) =>
  Effect.gen(function*() {
    const samples: Array<number> = []
    for (let i = 0; i < n; i++) {
      const t0 = now()
      yield* op(i)
      samples.push(now() - t0)
    }
    return samples
  })

interface DbResult {
  readonly floor: number
  readonly uncontended: number
  readonly uncontendedP99: number
  /** `withLock` with `keep` on one name again and again (lock caching), median, µs. */
  readonly cached: number
  /** Its process CPU time per body, µs. */
  readonly cachedCpu: number
  readonly backendOnly: number
  readonly backendOnlyCpu: number
  readonly backendOnlyRoundTrips: number
  readonly peerPair: number
  readonly commitFloor: number
  readonly unflushedFloor: number
  /** `commitBehindFloor`, µs. */
  readonly behindFloor: number
  /** `routinesFloor` (PostgreSQL), µs. */
  readonly routinesFloor: number
  readonly handoverMedian: number
  readonly handoverP90: number
  readonly waiterQueriesPerHandover: number
  readonly waiterQueriesPerSecond: number
  readonly waiterPollsPerSecond: number
  readonly handoverFloor: number
  readonly handoverFloorUnflushed: number
  readonly renewQueriesPerInterval: number
  readonly renewLatency: number
  readonly renewRowsTouched: number
  readonly failoverMedian: number
  readonly failoverMax: number
}

const skipped = Number.NaN

/** The one-row-per-run table the durable floors update (bench only, under the bench's prefix). */
const floorTable = (prefix: string) => `${prefix}commit_floor`
const floorTableDdl = {
  postgres: (table: string) => `CREATE TABLE IF NOT EXISTS ${table} (id varchar(32) PRIMARY KEY, n bigint NOT NULL)`,
  mysql: (table: string) => `CREATE TABLE IF NOT EXISTS ${table} (id VARCHAR(32) PRIMARY KEY, n BIGINT NOT NULL) ENGINE=InnoDB`
}

/**
 * The hand-over's floor on PostgreSQL: after the same 10–40 ms idle as the hand-over, one transaction
 * (a one-row `UPDATE` and a `pg_notify`) on a reserved connection, until a `LISTEN` connection of the
 * same process hears it: what a release that grants and hints costs at least. Two series: durable,
 * then without waiting for the flush (`synchronous_commit = off`), as Simba's release commits.
 */
const pgHandoverFloor = (prefix: string, run: string) =>
  Effect.scoped(Effect.gen(function*() {
    const pg = yield* PgClient.PgClient
    const channel = `${prefix}floor_${run}`
    const table = floorTable(prefix)
    const heard = yield* Queue.unbounded<number>()
    yield* pg.listen(channel).pipe(Stream.runForEach(() => Effect.flatMap(Effect.sync(now), (at) => Queue.offer(heard, at))), Effect.forkScoped)
    const conn = yield* pg.reserve
    yield* conn.executeRaw(floorTableDdl.postgres(table), [])
    yield* conn.executeRaw(`INSERT INTO ${table} VALUES ($1, 0) ON CONFLICT DO NOTHING`, [channel])
    // LISTEN is asynchronous to this fiber: wait until a notification is heard.
    const send = conn.executeRaw(`WITH u AS (UPDATE ${table} SET n = n + 1 WHERE id = $1 RETURNING n) SELECT pg_notify($1, n::text) FROM u`, [channel])
    yield* send.pipe(Effect.zipRight(Queue.take(heard).pipe(Effect.timeout("100 millis"))), Effect.retry({ times: 50 }))
    yield* Effect.zipRight(Effect.sleep("50 millis"), Queue.takeAll(heard))
    const series = Effect.gen(function*() {
      const samples: Array<number> = []
      for (let i = 0; i < 35; i++) {
        yield* Effect.promise(() => sleep(waitBeforeRelease()))
        const sent = now()
        yield* send
        const at = yield* Queue.take(heard)
        if (i >= 5) samples.push(at - sent)
      }
      return samples
    })
    const durable = yield* series
    yield* conn.executeRaw("SET synchronous_commit = off", [])
    const unflushed = yield* series
    yield* conn.executeRaw("RESET synchronous_commit", [])
    yield* conn.executeRaw(`DELETE FROM ${table} WHERE id = $1`, [channel])
    return { durable, unflushed }
  }))

/**
 * The floor of `withLock` on a fresh name as the client runs it: its release is sent and not awaited,
 * so the next acquire is sent right behind it, on another connection, and commits while the release
 * commits. Here: a one-row `UPDATE` commit sent on `first`, then (once it is on its way) one on
 * `second`, timed from the second's send to its answer; PostgreSQL without the flush, as Simba's
 * routines commit, MySQL/MariaDB durable. Median of 500 after `WARMUP`, ms.
 */
const commitBehindFloor = (first: Effect.Effect<unknown, unknown>, second: Effect.Effect<unknown, unknown>) =>
  Effect.gen(function*() {
    const samples: Array<number> = []
    for (let i = 0; i < WARMUP + 500; i++) {
      const ahead = yield* Effect.fork(first)
      // The forked fiber sends its statement before this one goes on.
      yield* Effect.yieldNow()
      const t0 = now()
      yield* second
      if (i >= WARMUP) samples.push(now() - t0)
      yield* Fiber.join(ahead)
    }
    return samples
  })

/**
 * The floor of `withLock` on a fresh name on PostgreSQL with no cost of the client's own: Simba's
 * acquire and release routines, called as the backend calls them (one statement each), on `first`
 * and `second` (connections of the peer pair's kind, reserved from the same pool). Each acquire is
 * awaited; its release is sent on the other connection and not awaited, so the next acquire runs
 * while it commits, as `withLock` leaves it; a release is joined only before the next is sent (one
 * statement at a time per connection). Timed from the acquire's send until the release is on its
 * way. Median of 500 after `WARMUP`, ms.
 */
const routinesFloorOn = (first: Connection, second: Connection, backend: LeaseBackendService, run: string) =>
  Effect.gen(function*() {
    const { sessionId } = yield* backend.openSession(millisOf(60_000))
    const schema = Migrations.postgres(prefix)
    const acquire = pgCallOf(schema.routine("acquire"), 4)
    const release = pgCallOf(schema.routine("release"), 4)
    const delay = Migrations.defaultLockDelayMs
    const samples: Array<number> = []
    let releasing: Fiber.RuntimeFiber<unknown, unknown> | undefined
    for (let i = 0; i < WARMUP + 500; i++) {
      const name = `rf-${run}-${i}`
      const t0 = now()
      const rows = yield* first.execute(acquire, [sessionId, name, delay, 1], undefined)
      const reply = (rows as ReadonlyArray<{ readonly r: { readonly status: string; readonly token?: string } }>)[0]?.r
      if (reply?.status !== "granted" || reply.token === undefined) {
        return yield* Effect.dieMessage(`routines floor: acquire answered ${JSON.stringify(reply)}`)
      }
      if (releasing !== undefined) yield* Fiber.join(releasing)
      releasing = yield* Effect.fork(second.execute(release, [sessionId, name, reply.token, delay], undefined))
      if (i >= WARMUP) samples.push(now() - t0)
    }
    if (releasing !== undefined) yield* Fiber.join(releasing)
    yield* backend.closeSession(sessionId)
    return samples
  })

const runDb = (db: Db, only: ReadonlySet<Section>, log: (line: string) => void) =>
  Effect.gen(function*() {
    const run = randomHex(4)
    const sql = yield* SqlClient
    // A schema of this run's source, in empty tables: the migration installs nothing where it finds
    // its version's marker, which an earlier run of the bench may have left.
    yield* (db === "postgres" ? dropPostgresPrefix(prefix) : dropMysqlPrefix(prefix))
    let floor: ReadonlyArray<number> = [skipped]
    if (only.has("floor")) {
      log(`${db}: floor`)
      floor = yield* timed(1000, () => sql.unsafe("SELECT 1"))
    }

    let uncontended: ReadonlyArray<number> = [skipped]
    let cached: ReadonlyArray<number> = [skipped]
    let cachedCpu = skipped
    let backendOnly: ReadonlyArray<number> = [skipped]
    let backendOnlyCpu = skipped
    let backendOnlyRoundTrips = skipped
    let peerPair: ReadonlyArray<number> = [skipped]
    let commitFloor: ReadonlyArray<number> = [skipped]
    let unflushedFloor: ReadonlyArray<number> = [skipped]
    let behindFloor: ReadonlyArray<number> = [skipped]
    let routinesFloor: ReadonlyArray<number> = [skipped]
    if (only.has("uncontended")) {
      log(`${db}: uncontended`)
      const count = yield* Ref.make(0)
      const backend = yield* backendOf(db, count)
      const { sessionId } = yield* backend.openSession(millisOf(60_000))
      const pair = (name: string) =>
        Effect.flatMap(backend.acquire(sessionId, name), (reply) =>
          reply._tag === "Granted" ? backend.release(sessionId, name, reply.token) : Effect.dieMessage(reply._tag))
      yield* timed(WARMUP, (i) => pair(`b-warm-${run}-${i}`))
      const queries0 = yield* Ref.get(count)
      const cpu0 = process.cpuUsage()
      backendOnly = yield* timed(500, (i) => pair(`b-${run}-${i}`))
      const cpu = process.cpuUsage(cpu0)
      backendOnlyCpu = (cpu.user + cpu.system) / 500
      backendOnlyRoundTrips = ((yield* Ref.get(count)) - queries0) / 500
      yield* backend.closeSession(sessionId)
      const client = yield* clientOn(backend)
      yield* timed(WARMUP, (i) => client.withLock(`u-warm-${run}-${i}`, Effect.void))
      uncontended = yield* timed(500, (i) => client.withLock(`u-${run}-${i}`, Effect.void))
      const kept = () => client.withLock(`kept-${run}`, Effect.void, { keep: "1 second" })
      yield* timed(WARMUP, kept)
      const cachedCpu0 = process.cpuUsage()
      cached = yield* timed(500, kept)
      const cachedUsed = process.cpuUsage(cachedCpu0)
      cachedCpu = (cachedUsed.user + cachedUsed.system) / 500
      ;[peerPair, commitFloor, unflushedFloor, behindFloor, routinesFloor] = yield* Effect.scoped(Effect.gen(function*() {
        const conn = yield* sql.reserve
        const other = yield* sql.reserve
        const lock = db === "postgres"
          ? (key: number) => Effect.zipRight(
            conn.executeRaw("SELECT pg_advisory_lock($1)", [key]),
            conn.executeRaw("SELECT pg_advisory_unlock($1)", [key])
          )
          : (key: number) => Effect.zipRight(
            conn.executeRaw("SELECT GET_LOCK(?, 10)", [`bench-${run}-${key}`]),
            conn.executeRaw("SELECT RELEASE_LOCK(?)", [`bench-${run}-${key}`])
          )
        yield* timed(WARMUP, (i) => lock(1_000_000 + i))
        const peer = yield* timed(500, (i) => lock(i))
        // Two autocommitted one-row updates: what any acquire + release that survives a crash costs at least.
        const table = floorTable(prefix)
        const param = (n: number) => (db === "postgres" ? `$${n}` : "?")
        const insertRow = (on: Connection, id: string) => on.executeRaw(`INSERT INTO ${table} VALUES (${param(1)}, 0)`, [id])
        const updateRow = (on: Connection, id: string) =>
          on.executeRaw(`UPDATE ${table} SET n = n + 1 WHERE id = ${param(1)}`, [id])
        // PostgreSQL: `effect` with `on`'s commits not waiting for the flush, as Simba's routines commit.
        const unflushedOn = <A, E>(on: ReadonlyArray<Connection>, effect: Effect.Effect<A, E>) =>
          Effect.acquireUseRelease(
            Effect.forEach(on, (c) => c.executeRaw("SET synchronous_commit = off", []), { discard: true }),
            () => effect,
            () => Effect.orDie(Effect.forEach(on, (c) => c.executeRaw("RESET synchronous_commit", []), { discard: true }))
          )
        const id = `floor-${run}`
        yield* conn.executeRaw(floorTableDdl[db](table), [])
        yield* insertRow(conn, id)
        const update = updateRow(conn, id)
        yield* timed(WARMUP, () => Effect.zipRight(update, update))
        const commits = yield* timed(500, () => Effect.zipRight(update, update))
        // PostgreSQL: the same two commits without waiting for the flush.
        const unflushed = db === "postgres"
          ? yield* unflushedOn(
            [conn],
            Effect.zipRight(timed(WARMUP, () => Effect.zipRight(update, update)), timed(500, () => Effect.zipRight(update, update)))
          )
          : [skipped]
        // The acquire behind the release: two rows, two connections (PostgreSQL: both without the flush).
        const otherId = `floor-${run}-b`
        yield* insertRow(other, otherId)
        const behindFloor = commitBehindFloor(update, updateRow(other, otherId))
        const behind = db === "postgres" ? yield* unflushedOn([conn, other], behindFloor) : yield* behindFloor
        yield* conn.executeRaw(`DELETE FROM ${table} WHERE id IN (${param(1)}, ${param(2)})`, [id, otherId])
        // PostgreSQL: Simba's own routines on these two connections, no client and no engine: each
        // acquire awaited, its release sent behind it on the other connection and not awaited (as
        // withLock sends it), so the next acquire runs while that release commits.
        const routines = db === "postgres" ? yield* routinesFloorOn(conn, other, backend, run) : [skipped]
        return [peer, commits, unflushed, behind, routines] as const
      }))
    }

    let handovers: ReadonlyArray<number> = [skipped]
    let waiterQueriesPerHandover = skipped
    let waiterQueriesPerSecond = skipped
    let waiterPollsPerSecond = skipped
    let handoverFloor: ReadonlyArray<number> = [skipped]
    let handoverFloorUnflushed: ReadonlyArray<number> = [skipped]
    if (only.has("handover")) {
      log(`${db}: handover`)
      const waiterCount = yield* Ref.make(0)
      const waiterRenewals = yield* Ref.make(0)
      const holder = yield* clientOn(yield* backendOf(db, yield* Ref.make(0)))
      const waiter = yield* clientOn(yield* backendOf(db, waiterCount, waiterRenewals))
      yield* waiter.withLock(`hw-warm-${run}`, Effect.void)
      const samples: Array<number> = []
      let waiterQueries = 0
      for (let i = 0; i < 35; i++) {
        const name = `h-${run}-${i}`
        const holding = yield* Scope.make()
        yield* Scope.extend(holder.lock(name), holding)
        const acquired = yield* Deferred.make<{ readonly at: number; readonly queries: number }>()
        const before = yield* Ref.get(waiterCount)
        // The waiter's queries are read as its body starts: its own release, sent as the body ends,
        // is not a query to learn of the hand-over.
        const fiber = yield* Effect.fork(waiter.withLock(
          name,
          Effect.flatMap(Ref.get(waiterCount), (queries) => Deferred.succeed(acquired, { at: now(), queries }))
        ))
        yield* Effect.promise(() => sleep(waitBeforeRelease()))
        const released = now()
        yield* Scope.close(holding, Exit.void)
        const { at, queries: after } = yield* Deferred.await(acquired)
        yield* Fiber.join(fiber)
        if (i >= 5) {
          samples.push(at - released)
          waiterQueries += after - before
        }
      }
      handovers = samples
      waiterQueriesPerHandover = waiterQueries / samples.length
      // A long wait (2 s): the waiter's queries per second while it waits (its first try excluded).
      const longName = `hl-${run}`
      const longHolding = yield* Scope.make()
      yield* Scope.extend(holder.lock(longName), longHolding)
      const longFiber = yield* Effect.fork(waiter.withLock(longName, Effect.void))
      yield* Effect.promise(() => sleep(100))
      const longBefore = yield* Ref.get(waiterCount)
      const renewalsBefore = yield* Ref.get(waiterRenewals)
      yield* Effect.promise(() => sleep(2000))
      const longQueries = (yield* Ref.get(waiterCount)) - longBefore
      waiterQueriesPerSecond = longQueries / 2
      waiterPollsPerSecond = (longQueries - ((yield* Ref.get(waiterRenewals)) - renewalsBefore)) / 2
      yield* Scope.close(longHolding, Exit.void)
      yield* Fiber.join(longFiber)
      if (db === "postgres") {
        const floors = yield* pgHandoverFloor(prefix, run)
        handoverFloor = floors.durable
        handoverFloorUnflushed = floors.unflushed
      }
    }

    let renewQueriesPerInterval = skipped
    let renewLatency: ReadonlyArray<number> = [skipped]
    let renewRowsTouched = skipped
    if (only.has("renew")) {
      log(`${db}: renew of 1,000 held leases`)
      const renewCount = yield* Ref.make(0)
      const renewBackend = yield* backendOf(db, renewCount)
      const renewer = yield* clientOn(renewBackend)
      yield* Effect.forEach(
        Array.from({ length: 1000 }, (_, i) => `r-${run}-${i}`),
        (name) => renewer.lock(name),
        { concurrency: 8, discard: true }
      )
      yield* Effect.promise(() => sleep(1200))
      const renew0 = yield* Ref.get(renewCount)
      yield* Effect.promise(() => sleep(3000))
      renewQueriesPerInterval = ((yield* Ref.get(renewCount)) - renew0) / 3
      // One unchanged renewal, direct: latency and rows touched.
      const direct = yield* backendOf(db, yield* Ref.make(0))
      const s = yield* direct.openSession(millisOf(60_000))
      yield* Effect.forEach(Array.from({ length: 1000 }, (_, i) => `d-${run}-${i}`), (name) => direct.acquire(s.sessionId, name), {
        concurrency: 8,
        discard: true
      })
      const first = yield* direct.keepAlive(s.sessionId, millisOf(60_000))
      const version = first._tag === "Live" ? first.version : undefined
      renewLatency = yield* timed(50, () => direct.keepAlive(s.sessionId, millisOf(60_000), version))
      renewRowsTouched = yield* rowsTouched(db, sql, s.sessionId, version ?? "0")
      yield* direct.closeSession(s.sessionId)
    }

    const failovers: Array<number> = []
    if (only.has("failover")) {
      log(`${db}: failover after a freeze (4 runs, lease 2 s)`)
      for (let i = 0; i < 4; i++) {
        const frozen = yield* Ref.make(false)
        const base = yield* backendOf(db, yield* Ref.make(0))
        const freezable = freezing(base, frozen)
        const timing = { leaseDuration: "2 seconds" } as const
        const h = yield* clientOn(freezable, timing)
        const w = yield* clientOn(yield* backendOf(db, yield* Ref.make(0)), timing)
        const name = `f-${run}-${i}`
        yield* Effect.forkDaemon(h.withLock(name, Effect.never).pipe(Effect.ignore))
        yield* awaitHeld(h, name)
        yield* Effect.promise(() => sleep(Math.random() * 667))
        const frozenAt = now()
        yield* Ref.set(frozen, true)
        const at = yield* w.withLock(name, Effect.sync(now))
        failovers.push(at - frozenAt)
      }
    } else {
      failovers.push(skipped)
    }

    return {
      floor: median(floor) * 1000,
      uncontended: median(uncontended) * 1000,
      uncontendedP99: percentile(uncontended, 99) * 1000,
      cached: median(cached) * 1000,
      cachedCpu,
      backendOnly: median(backendOnly) * 1000,
      backendOnlyCpu,
      backendOnlyRoundTrips,
      peerPair: median(peerPair) * 1000,
      commitFloor: median(commitFloor) * 1000,
      unflushedFloor: median(unflushedFloor) * 1000,
      behindFloor: median(behindFloor) * 1000,
      routinesFloor: median(routinesFloor) * 1000,
      handoverMedian: median(handovers),
      handoverP90: percentile(handovers, 90),
      waiterQueriesPerHandover,
      waiterQueriesPerSecond,
      waiterPollsPerSecond,
      handoverFloor: median(handoverFloor),
      handoverFloorUnflushed: median(handoverFloorUnflushed),
      renewQueriesPerInterval,
      renewLatency: median(renewLatency),
      renewRowsTouched,
      failoverMedian: median(failovers),
      failoverMax: Math.max(...failovers)
    } satisfies DbResult
  }).pipe(Effect.scoped, Effect.provide(rawClient(db)))

const millisOf = (ms: number) => Duration.millis(ms)

/**
 * Once `frozen` is set no call reaches the database (the holder's process stopped: its session is
 * never closed); each hangs 3 s and fails, so the frozen client can still be closed at the end.
 */
const freezing = (backend: LeaseBackendService, frozen: Ref.Ref<boolean>): LeaseBackendService => {
  const hang = Effect.zipRight(
    Effect.sleep("3 seconds"),
    Effect.fail(new BackendError({ backend: backend.backend, operation: "frozen", cause: "the holder is frozen" }))
  )
  const gate = <A>(call: Effect.Effect<A, BackendError>) => Effect.flatMap(Ref.get(frozen), (f) => (f ? hang : call))
  return {
    ...backend,
    openSession: (ttl) => gate(backend.openSession(ttl)),
    keepAlive: (id, ttl, known) => gate(backend.keepAlive(id, ttl, known)),
    closeSession: (id) => gate(backend.closeSession(id)),
    acquire: (id, name) => gate(backend.acquire(id, name)),
    release: (id, name, token) => gate(backend.release(id, name, token)),
    join: (id, group) => gate(backend.join(id, group)),
    leave: (id, group) => gate(backend.leave(id, group)),
    members: (group) => gate(backend.members(group))
  }
}

const awaitHeld = (client: SimbaClient, name: string) =>
  Effect.gen(function*() {
    for (;;) {
      const snapshot = yield* client.snapshot
      if (snapshot.elections.some((e) => e.name === name && e.token !== undefined)) return
      yield* Effect.sleep("2 millis")
    }
  })

/** Rows an unchanged renewal of a session holding 1,000 leases reads or writes, from the database's own counters. */
const rowsTouched = (db: Db, sql: SqlClientService, sessionId: string, version: string) =>
  Effect.scoped(Effect.gen(function*() {
    const conn = yield* sql.reserve
    if (db === "postgres") {
      // PostgreSQL 15 counts in pg_stat_xact_* what this connection did in earlier transactions and has
      // not reported yet (the pool's connection ran the 1,000 acquires: ~2,400 rows); report them first.
      yield* conn.executeRaw("SELECT pg_stat_force_next_flush()", [])
      yield* conn.executeRaw("BEGIN", [])
      yield* conn.executeRaw(`SELECT ${Migrations.routine(prefix, Migrations.postgresVersion, "keep_alive")}($1, 60000, $2)`, [sessionId, version])
      const rows = yield* conn.executeValues(
        `SELECT coalesce(sum(coalesce(seq_tup_read, 0) + coalesce(idx_tup_fetch, 0) + n_tup_upd + n_tup_ins + n_tup_del), 0)
         FROM pg_stat_xact_user_tables WHERE relname LIKE $1`,
        [`${prefix}%`]
      )
      yield* conn.executeRaw("ROLLBACK", [])
      return Number((rows[0] as ReadonlyArray<unknown>)[0])
    }
    const handlers = () =>
      Effect.map(
        conn.executeValues("SHOW SESSION STATUS WHERE Variable_name IN ('Handler_read_key', 'Handler_read_next', 'Handler_read_rnd_next', 'Handler_update', 'Handler_write', 'Handler_delete')", []),
        (rows) => (rows as ReadonlyArray<ReadonlyArray<unknown>>).reduce((sum, row) => sum + Number(row[1]), 0)
      )
    const before = yield* handlers()
    yield* conn.executeRaw(`CALL ${Migrations.routine(prefix, Migrations.mysqlVersion, "keep_alive")}(?, 60000, ?)`, [sessionId, version])
    const after = yield* handlers()
    // SHOW STATUS itself reads its rows through handlers: measure it alone and subtract.
    const again = yield* handlers()
    return after - before - (again - after)
  }))

export const main = async (
  log: (line: string) => void = (line) => process.stderr.write(`bench: ${line}\n`),
  only: ReadonlySet<Section> = new Set(sections)
) => {
  const results: Partial<Record<Db, DbResult>> = {}
  for (const db of ["postgres", "mysql"] as const) {
    results[db] = await Effect.runPromise(runDb(db, only, log))
  }
  const pg = results.postgres!
  const my = results.mysql!
  const rows: Array<Row> = []
  const row = (bench: string, metric: string, unit: string, f: (r: DbResult) => number, peer?: (r: DbResult) => number) =>
    rows.push({
      bench,
      metric,
      unit,
      postgres: f(pg),
      mysql: f(my),
      peerPostgres: peer ? peer(pg) : null,
      peerMysql: peer ? peer(my) : null
    })
  row("sql floor", "SELECT 1 through @effect/sql, median", "µs", (r) => r.floor)
  row("sql uncontended", "withLock on a fresh name, median (peer: raw advisory lock + unlock pair)", "µs", (r) => r.uncontended, (r) => r.peerPair)
  row("sql uncontended", "withLock on a fresh name, p99", "µs", (r) => r.uncontendedP99)
  row("sql uncontended", "withLock with keep: one name taken again and again, median of 500 (peer: raw advisory lock + unlock pair)", "µs", (r) => r.cached, (r) => r.peerPair)
  row("sql uncontended", "withLock with keep: process CPU time per body", "µs", (r) => r.cachedCpu)
  row("sql uncontended", "LeaseBackend alone, acquire + release, median", "µs", (r) => r.backendOnly)
  row("sql uncontended", "LeaseBackend alone, process CPU time per acquire + release", "µs", (r) => r.backendOnlyCpu)
  row("sql uncontended", "LeaseBackend alone, round trips per acquire + release (client count)", "round trips", (r) => r.backendOnlyRoundTrips)
  row("sql uncontended", "durable floor: two one-row UPDATE commits on one connection, median", "µs", (r) => r.commitFloor)
  row("sql uncontended", "floor without the flush (PostgreSQL, as Simba commits): the same two commits with synchronous_commit off, median", "µs", (r) => r.unflushedFloor)
  row("sql uncontended", "floor of withLock (its release not awaited): one commit sent right behind another's, on a second connection, as Simba commits (PostgreSQL without the flush), median", "µs", (r) => r.behindFloor)
  row("sql uncontended", "floor (PostgreSQL): Simba's acquire and release routines on the peer pair's connections, no client, the release sent behind the acquire and not awaited, median", "µs", (r) => r.routinesFloor)
  row("sql handover", "release → waiter holds, median of 30", "ms", (r) => r.handoverMedian)
  row("sql handover", "floor (PostgreSQL): one durable UPDATE + pg_notify commit → a LISTEN connection hears it, same idle, median of 30", "ms", (r) => r.handoverFloor)
  row("sql handover", "floor without the flush (PostgreSQL, as Simba's release commits): the same, synchronous_commit off, median of 30", "ms", (r) => r.handoverFloorUnflushed)
  row("sql handover", "release → waiter holds, p90 of 30", "ms", (r) => r.handoverP90)
  row("sql handover", "waiter queries per handover (waits of 10–40 ms; its first try included)", "queries", (r) => r.waiterQueriesPerHandover)
  row("sql handover", "waiter queries/s during a 2 s wait (retries, renewals, polls)", "1/s", (r) => r.waiterQueriesPerSecond)
  row("sql handover", "of which not its session's renewals (retries, polls)", "1/s", (r) => r.waiterPollsPerSecond)
  row("sql renew", "queries per renew interval, client holding 1,000 leases", "queries", (r) => r.renewQueriesPerInterval)
  row("sql renew", "unchanged renewal of 1,000 leases, median latency", "ms", (r) => r.renewLatency)
  row("sql renew", "rows read or written by one unchanged renewal of 1,000 leases", "rows", (r) => r.renewRowsTouched)
  row("sql failover", "holder frozen → waiter holds, median of 4 (lease 2 s; bound 2,667 ms)", "ms", (r) => r.failoverMedian)
  row("sql failover", "holder frozen → waiter holds, max of 4", "ms", (r) => r.failoverMax)

  const out = fileURLToPath(new URL("./results-sql.json", import.meta.url))
  const complete = sections.every((section) => only.has(section))
  if (complete) writeFileSync(out, `${JSON.stringify(rows, null, 2)}\n`)
  const fmt = (x: number | null) => (x === null || !Number.isFinite(x) ? "—" : Math.abs(x) >= 100 ? x.toFixed(0) : x.toFixed(2))
  const header = ["bench", "metric", "unit", "postgres", "mysql", "peer pg", "peer mysql"]
  const body = rows.map((r) => [r.bench, r.metric, r.unit, fmt(r.postgres), fmt(r.mysql), fmt(r.peerPostgres), fmt(r.peerMysql)])
  const widths = header.map((h, i) => Math.max(h.length, ...body.map((b) => b[i]!.length)))
  const line = (cells: ReadonlyArray<string>) => cells.map((c, i) => (i >= 3 ? c.padStart(widths[i]!) : c.padEnd(widths[i]!))).join("  ")
  console.log()
  console.log(line(header))
  console.log(widths.map((w) => "-".repeat(w)).join("  "))
  for (const b of body) console.log(line(b))
  console.log()
  const verdict = (ok: boolean) => (ok ? "met" : "MISSED")
  console.log("Targets:")
  console.log(`  PostgreSQL: uncontended <= 2.5× the advisory-lock pair: ${(pg.uncontended / pg.peerPair).toFixed(2)}× → ${verdict(pg.uncontended <= 2.5 * pg.peerPair)} (its two commits without the flush alone are ${(pg.unflushedFloor / pg.peerPair).toFixed(2)}× the pair; its own two routines with no client, the release not awaited, ${(pg.routinesFloor / pg.peerPair).toFixed(2)}×)`)
  // withLock does not await its release: the floor that can stop it is one durable commit sent behind
  // another (the acquire behind the last release), not two commits in a row.
  console.log(`  MySQL/MariaDB: uncontended <= 3× the GET_LOCK pair, or the durable floor that stops it: ${(my.uncontended / my.peerPair).toFixed(2)}× the pair, ${(my.uncontended / my.behindFloor).toFixed(2)}× its floor, one durable commit behind another (${my.behindFloor.toFixed(0)} µs, itself ${(my.behindFloor / my.peerPair).toFixed(2)}× the pair; two durable commits in a row ${my.commitFloor.toFixed(0)} µs) → ${verdict(my.uncontended <= Math.max(3 * my.peerPair, my.behindFloor))}`)
  for (const [label, r] of [["PostgreSQL", pg], ["MySQL/MariaDB", my]] as const) {
    console.log(`  ${label}: renewal one round trip per interval: ${r.renewQueriesPerInterval.toFixed(2)} → ${verdict(r.renewQueriesPerInterval <= 1.05)}; rows touched ${r.renewRowsTouched}`)
    console.log(`  ${label}: failover ≤ leaseDuration + renewInterval (2,667 ms): max ${r.failoverMax.toFixed(0)} ms → ${verdict(r.failoverMax <= 2667)}`)
  }
  console.log(`  PostgreSQL handover median < 1.5 ms: ${pg.handoverMedian.toFixed(2)} ms → ${verdict(pg.handoverMedian < 1.5)} (floor, an UPDATE + pg_notify heard by a listener after the same idle: ${pg.handoverFloor.toFixed(2)} ms durable, ${pg.handoverFloorUnflushed.toFixed(2)} ms without the flush, as Simba's release commits)`)
  console.log(`  PostgreSQL with no waiter queries: ${(pg.waiterQueriesPerHandover - 1).toFixed(2)} queries per handover beyond the first try; while waiting ${pg.waiterPollsPerSecond.toFixed(1)} queries/s besides renewals, the candidate's retry timer (every renewInterval / 2 + jitter), none to learn of a release`)
  console.log(`  MySQL handover median < 100 ms at ≤ 20 queries/s: ${my.handoverMedian.toFixed(1)} ms, ${my.waiterQueriesPerSecond.toFixed(1)} queries/s → ${verdict(my.handoverMedian < 100 && my.waiterQueriesPerSecond <= 20)}`)
  console.log(complete ? `Wrote ${out}` : "Some sections left out (--only): nothing written")
}

if (import.meta.url === `file://${process.argv[1]}`) {
  main(undefined, chosen(process.argv.slice(2))).catch((error: unknown) => {
    console.error(error)
    process.exitCode = 1
  })
}
