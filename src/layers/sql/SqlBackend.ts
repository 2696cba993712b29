/**
 * The SQL backends' one implementation (PostgreSQL and MySQL/MariaDB) over an `@effect/sql`
 * `SqlClient`, with dialect branches (`sql.onDialectOrElse`) where the databases differ. Each SPI
 * operation is one call of the routine the migration installed, which runs its own transaction and
 * takes every decision about time with the database's clock after taking its locks: one round trip
 * whatever the number of leases. A routine rolled back by a deadlock or a serialisation failure is
 * run again, at most `maxRetries` times. `@effect/sql` is an optional peer: its types only are
 * imported here. The contract: docs/design.md, "PostgreSQL and MySQL/MariaDB".
 */
import type * as SqlClient from "@effect/sql/SqlClient"
import type * as Scope from "effect/Scope"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Either from "effect/Either"
import * as Schedule from "effect/Schedule"
import * as Stream from "effect/Stream"
import {
  AcquireReply,
  BackendError,
  type GroupView,
  Hint,
  type Inventory,
  type JoinReply,
  KeepAliveReply,
  type LeaseBackendService,
  type LeaseStatus,
  make as makeBackend,
  makeHintHub,
  type OpenedSession,
  type SessionStatus
} from "../../LeaseBackend.js"
import { isSessionId, newSessionId } from "../../internal/sessionId.js"
import * as Lanes from "./lanes.js"
import * as Migrations from "./migrations.js"
import * as MysqlMigrations from "./mysqlMigrations.js"
import * as Waiting from "./waiting.js"

/** The two databases, by the backend name used in errors, metrics and spans. */
export type Backend = "postgres" | "mysql"

/** How many times a routine that hit a deadlock or a serialisation failure is run again. */
export const maxRetries = 5

/** What `make` needs besides the client. */
export interface Settings {
  readonly backend: Backend
  readonly prefix: string
  /**
   * Pushed hints (PostgreSQL `LISTEN`). Without them (`undefined`, MySQL) the backend makes its own:
   * a release through it hints at once, and while local candidates wait, one query every
   * `pollInterval` finds which of their names are free now.
   */
  readonly hints: Stream.Stream<Hint> | undefined
  /** The names local candidates were refused (`waiting.ts`). */
  readonly waiting: Waiting.Waiting
  /** How often the waited names are checked when there are no pushed hints. Default 60 ms. */
  readonly pollInterval?: Duration.Duration | undefined
  /**
   * PostgreSQL: how long nothing is granted once the database is found to have lost commits (its
   * unlogged boot table empty: a crash, a promoted replica). Default 15 s.
   */
  readonly lockDelay?: Duration.Duration | undefined
  /**
   * How many connections of the client's pool the backend reserves for its routine calls
   * (`lanes.ts`), or `undefined` to take one from the pool per call: only for a pool of the
   * backend's own, which must keep at least one connection besides them.
   */
  readonly lanes?: number | undefined
  /**
   * Whether this dialect's schema grants holds (semaphore permits and read holds: its acquire applies
   * the pool rule to hold names and may answer `conflict`). Default: `false`.
   */
  readonly holds?: boolean | undefined
}

/** The reply of every routine: one row, the fields its operation uses. */
interface Reply {
  readonly status: "live" | "expired" | "granted" | "held" | "conflict" | "joined" | "released" | "ok"
  readonly token: string | undefined
  readonly remaining: number | undefined
  readonly version: string | undefined
  readonly leases: ReadonlyArray<readonly [string, string]> | undefined
  readonly groups: ReadonlyArray<readonly [string, string]> | undefined
  readonly members: ReadonlyArray<string> | undefined
  /** The tokens a grant reserved (its token the last of them). */
  readonly reserved: number | undefined
  /** A `conflict`: what the name is held as, and what was asked (`semaphore of 3 permits`, `lock`). */
  readonly held: string | undefined
  readonly asked: string | undefined
  /** PostgreSQL: this call found the database's boot row gone, so commits may have been lost. */
  readonly lost: boolean
}

const statuses: ReadonlySet<string> = new Set(["live", "expired", "granted", "held", "conflict", "joined", "released", "ok"])

/**
 * Reads a reply by hand rather than with a `Schema`: every call reads one, and a schema of unions
 * and `parseJson` cost more client CPU than the rest of the call's own work. A field absent and SQL
 * `NULL` read alike; a field of the wrong type fails the call, naming the field.
 */
type Field<A> = Either.Either<A | undefined, string>
const invalidField = (field: string, value: unknown) => Either.left(`the reply's ${field} is not valid: ${JSON.stringify(value)}`)
const isAbsent = (value: unknown): value is undefined | null => value === undefined || value === null
const isString = (item: unknown): item is string => typeof item === "string"
const isPair = (item: unknown): item is readonly [string, string] =>
  Array.isArray(item) && item.length === 2 && isString(item[0]) && isString(item[1])

const stringField = (row: Record<string, unknown>, field: string): Field<string> => {
  const value = row[field]
  return isAbsent(value) ? Either.right(undefined) : isString(value) ? Either.right(value) : invalidField(field, value)
}
/** A number, or its decimal text (MySQL may answer a `BIGINT` expression as text). */
const numberField = (row: Record<string, unknown>, field: string): Field<number> => {
  const value = row[field]
  if (isAbsent(value)) return Either.right(undefined)
  const number = isString(value) && value.trim() !== "" ? Number(value) : value
  return typeof number === "number" && !Number.isNaN(number) ? Either.right(number) : invalidField(field, value)
}
const parsedJson = (text: string): unknown => {
  try {
    return JSON.parse(text)
  } catch {
    return undefined
  }
}
/** A list, as JSON text (MySQL) or already parsed (`json` values on PostgreSQL). */
const listField = <A>(row: Record<string, unknown>, field: string, isItem: (item: unknown) => item is A): Field<ReadonlyArray<A>> => {
  const value = row[field]
  if (isAbsent(value)) return Either.right(undefined)
  const list = isString(value) ? parsedJson(value) : value
  return Array.isArray(list) && list.every(isItem) ? Either.right(list as ReadonlyArray<A>) : invalidField(field, value)
}

/** The statement that calls PostgreSQL routine `routine` with `arity` placeholders; its reply is column `r`. */
export const pgCallOf = (routine: string, arity: number): string =>
  `SELECT ${routine}(${Array.from({ length: arity }, (_, i) => `$${i + 1}`).join(", ")}) AS r`

const readReply = (row: unknown): Either.Either<Reply, string> => {
  if (typeof row !== "object" || row === null) return Either.left(`the reply is not a row: ${JSON.stringify(row)}`)
  const fields = row as Record<string, unknown>
  const status = fields["status"]
  if (!isString(status) || !statuses.has(status)) return invalidField("status", status)
  return Either.map(
    Either.all({
      token: stringField(fields, "token"),
      remaining: numberField(fields, "remaining"),
      version: stringField(fields, "version"),
      leases: listField(fields, "leases", isPair),
      groups: listField(fields, "groups", isPair),
      members: listField(fields, "members", isString),
      reserved: numberField(fields, "reserved"),
      held: stringField(fields, "held"),
      asked: stringField(fields, "asked")
    }),
    (read) => ({ status: status as Reply["status"], ...read, lost: fields["lost"] === true })
  )
}

const tokenPattern = /^[1-9][0-9]{0,18}$/
const versionPattern = /^(0|[1-9][0-9]{0,17})$/

const byName = (a: string, b: string) => (a < b ? -1 : a > b ? 1 : 0)

const tokenOf = (reply: Reply): Either.Either<bigint, string> =>
  reply.token !== undefined && tokenPattern.test(reply.token)
    ? Either.right(BigInt(reply.token))
    : Either.left(`the reply carries no valid token: ${JSON.stringify(reply.token)}`)

/** Group views from the flat `[group, member]` pairs a renewal returns, sorted by group and member. */
const groupViews = (pairs: ReadonlyArray<readonly [string, string]>): ReadonlyArray<GroupView> => {
  const byGroup = new Map<string, Array<string>>()
  for (const [group, member] of pairs) {
    const members = byGroup.get(group)
    if (members === undefined) byGroup.set(group, [member])
    else members.push(member)
  }
  return [...byGroup.keys()].sort(byName).map((group) => ({ group, members: byGroup.get(group)!.sort(byName) }))
}

/**
 * The reads of `inspect`, one per table, plain `SELECT`s on the tables the routines write. Each
 * decides who is alive with one reading of the database's clock, taken in the statement:
 * `statement_timestamp()` on PostgreSQL (`now()` would be the start of an enclosing transaction),
 * `UTC_TIMESTAMP(6)` on MySQL (fixed per statement; `expires_at` is UTC). Tokens come as text, so
 * none loses precision on the way. The waiter queue exists on PostgreSQL only.
 */
export const inspectQueries = (backend: Backend, prefix: string): {
  readonly sessions: string
  readonly leases: string
  readonly waiters: string | undefined
  readonly members: string
} => {
  const pg = backend === "postgres"
  const now = pg ? "statement_timestamp()" : "UTC_TIMESTAMP(6)"
  const live = `s.expires_at > ${now}`
  return {
    sessions: `SELECT s.id AS session_id, ${
      pg
        ? `floor(extract(epoch FROM s.expires_at - ${now}) * 1000)::bigint`
        : `TIMESTAMPDIFF(MICROSECOND, ${now}, s.expires_at) DIV 1000`
    } AS remaining FROM ${prefix}session s WHERE ${live}`,
    // A lease naming a session that is gone or expired is free (the routines decide so too).
    leases: `SELECT l.name AS name, ${pg ? "l.token::text" : "CAST(l.token AS CHAR)"} AS token,
CASE WHEN ${live} THEN l.session_id END AS holder
FROM ${prefix}lease l LEFT JOIN ${prefix}session s ON s.id = l.session_id`,
    // In the order a release hands the lease on.
    waiters: pg
      ? `SELECT w.name AS name, w.session_id AS session_id FROM ${prefix}waiter w
JOIN ${prefix}session s ON s.id = w.session_id WHERE ${live} ORDER BY w.since, w.session_id`
      : undefined,
    members: `SELECT m.group_name AS group_name, m.session_id AS session_id FROM ${prefix}member m
JOIN ${prefix}session s ON s.id = m.session_id WHERE ${live}`
  }
}

/** A stored token: 0 (a lease row never granted) or above. */
const storedTokenPattern = /^(0|[1-9][0-9]{0,18})$/

const asRow = (row: unknown): Either.Either<Record<string, unknown>, string> =>
  typeof row === "object" && row !== null
    ? Either.right(row as Record<string, unknown>)
    : Either.left(`not a row: ${JSON.stringify(row)}`)

/** A field that must be there: `NULL` or absent is as wrong as a value of the wrong type. */
const required = <A>(field: string, read: Field<A>): Either.Either<A, string> =>
  Either.flatMap(read, (value) => value === undefined ? Either.left(`the row has no ${field}`) : Either.right(value))

/** Reads every row of one of `inspect`'s reads; the first bad row fails it, naming the read. */
const readRows = <A>(
  read: string,
  rows: ReadonlyArray<unknown>,
  readRow: (row: Record<string, unknown>) => Either.Either<A, string>
): Either.Either<ReadonlyArray<A>, string> =>
  Either.mapLeft(Either.all(rows.map((row) => Either.flatMap(asRow(row), readRow))), (cause) => `inspect, ${read}: ${cause}`)

const readSession = (row: Record<string, unknown>): Either.Either<SessionStatus, string> =>
  Either.map(
    Either.all([required("session_id", stringField(row, "session_id")), required("remaining", numberField(row, "remaining"))]),
    ([sessionId, remaining]) => ({ sessionId, remaining: Duration.millis(Math.max(0, remaining)) })
  )

const readLease = (row: Record<string, unknown>): Either.Either<Omit<LeaseStatus, "waiters">, string> =>
  Either.flatMap(
    Either.all([required("name", stringField(row, "name")), required("token", stringField(row, "token")), stringField(row, "holder")]),
    ([name, token, holder]) =>
      storedTokenPattern.test(token)
        ? Either.right({ name, token: BigInt(token), holder })
        : invalidField("token", token)
  )

/** A `[key, session id]` row: a waiter (`name`) or a member (`group_name`). */
const readPair = (key: string) => (row: Record<string, unknown>): Either.Either<readonly [string, string], string> =>
  Either.all([required(key, stringField(row, key)), required("session_id", stringField(row, "session_id"))])

/** The pairs' session ids by key, in the pairs' order. */
const byKeyOf = (pairs: ReadonlyArray<readonly [string, string]>): ReadonlyMap<string, ReadonlyArray<string>> => {
  const map = new Map<string, Array<string>>()
  for (const [key, sessionId] of pairs) {
    const list = map.get(key)
    if (list === undefined) map.set(key, [sessionId])
    else list.push(sessionId)
  }
  return map
}

/** The error codes after which the whole routine was rolled back and may simply run again. */
const retryable = (backend: Backend) => (error: unknown): boolean => {
  const cause = typeof error === "object" && error !== null && "cause" in error ? error.cause : undefined
  if (typeof cause !== "object" || cause === null) return false
  if (backend === "postgres") return "code" in cause && (cause.code === "40001" || cause.code === "40P01")
  return "errno" in cause && (cause.errno === 1213 || cause.errno === 1205 || cause.errno === 1062)
}

/** The first row of a routine's reply: `SELECT f() AS r` on PostgreSQL, the first result set of a `CALL` on MySQL. */
const firstRow = (backend: Backend, rows: ReadonlyArray<unknown>): unknown => {
  const first = rows[0]
  if (backend === "postgres") return typeof first === "object" && first !== null && "r" in first ? first.r : first
  // mysql2 answers a CALL with its result sets followed by a status header.
  return Array.isArray(first) ? first[0] : first
}

/**
 * Runs the migration: creates the tables and routines unless this version's are installed,
 * serialised between processes starting at once (PostgreSQL `pg_advisory_xact_lock` in the
 * migration's transaction; MySQL `GET_LOCK` on one reserved connection).
 */
export const migrate = (
  sql: SqlClient.SqlClient,
  backend: Backend,
  prefix: string
): Effect.Effect<void, unknown> =>
  sql.onDialectOrElse({
    pg: () => {
      const schema = Migrations.postgres(prefix)
      return sql.withTransaction(Effect.gen(function*() {
        yield* sql.unsafe("SELECT pg_advisory_xact_lock(hashtext($1))", [`simba-migrate:${prefix}`])
        const installed = yield* sql.unsafe<{ installed: boolean }>(
          "SELECT to_regproc($1) IS NOT NULL AS installed",
          [schema.marker]
        )
        if (installed[0]?.installed === true) return
        for (const statement of schema.statements) yield* sql.unsafe(statement)
      }))
    },
    mysql: () => {
      const schema = MysqlMigrations.mysql(prefix)
      const lock = `simba-migrate:${prefix}`
      return Effect.scoped(Effect.gen(function*() {
        const conn = yield* sql.reserve
        const taken = yield* conn.executeValues("SELECT GET_LOCK(?, 60)", [lock])
        if ((taken[0] as ReadonlyArray<unknown> | undefined)?.[0] !== 1) {
          return yield* Effect.fail(`the migration lock ${lock} was not granted within 60 seconds`)
        }
        yield* Effect.gen(function*() {
          const installed = yield* conn.executeValues(
            "SELECT COUNT(*) FROM information_schema.ROUTINES WHERE ROUTINE_SCHEMA = DATABASE() AND ROUTINE_NAME = ?",
            [schema.marker]
          )
          if (Number((installed[0] as ReadonlyArray<unknown> | undefined)?.[0]) > 0) return
          for (const statement of schema.statements) {
            const procedure = /^CREATE PROCEDURE (\S+)\(/.exec(statement)
            // A migration that died half-way left some procedures: replace them (under the lock).
            if (procedure !== null) yield* conn.executeUnprepared(`DROP PROCEDURE IF EXISTS ${procedure[1]}`, [], undefined)
            yield* conn.executeUnprepared(statement, [], undefined)
          }
        }).pipe(Effect.ensuring(Effect.ignore(conn.executeValues("SELECT RELEASE_LOCK(?)", [lock]))))
      }))
    },
    orElse: () => Effect.fail(`the ${backend} backend needs a PostgreSQL or MySQL/MariaDB SqlClient`)
  })

/**
 * Builds the backend on `sql`: runs the migration, then answers every operation with one call of
 * its routine. The client's transforms are not used (`withoutTransforms`), so an application's
 * client with `transformResultNames` can be shared.
 */
export const make = (
  client: SqlClient.SqlClient,
  settings: Settings
): Effect.Effect<LeaseBackendService, BackendError, Scope.Scope> =>
  Effect.gen(function*() {
    const { backend, prefix, waiting } = settings
    const sql = client.withoutTransforms()
    yield* migrate(sql, backend, prefix).pipe(
      Effect.mapError((cause) => new BackendError({ backend, operation: "migrate", cause }))
    )
    // The statement of each operation, built once: a routine call with placeholders.
    const schema = sql.onDialectOrElse({ pg: () => Migrations.postgres(prefix), orElse: () => MysqlMigrations.mysql(prefix) })
    const statementOf = (operation: string, arity: number): string =>
      sql.onDialectOrElse({
        pg: () => pgCallOf(schema.routine(operation), arity),
        orElse: () => `CALL ${schema.routine(operation)}(${Array.from({ length: arity }, () => "?").join(", ")})`
      })
    // PostgreSQL's acquire and release take the lock-delay in ms (acquire then the block of tokens to
    // reserve) after their other parameters.
    const pg = backend === "postgres"
    const lockDelayMillis = settings.lockDelay === undefined ? Migrations.defaultLockDelayMs : Duration.toMillis(settings.lockDelay)
    const delayParam: ReadonlyArray<unknown> = pg ? [lockDelayMillis] : []
    const statements = {
      open: statementOf("open", 2),
      keep_alive: statementOf("keep_alive", 3),
      close: statementOf("close", 1),
      acquire: statementOf("acquire", pg ? 4 : 3),
      release: statementOf("release", 3 + delayParam.length),
      join: statementOf("join", 2),
      leave: statementOf("leave", 2),
      members: statementOf("members", 1)
    } as const
    const isRetryable = retryable(backend)
    const lanes = settings.lanes === undefined ? undefined : yield* Lanes.make(sql, settings.lanes)
    const execute = lanes === undefined
      ? (statement: string, params: ReadonlyArray<unknown>) => sql.unsafe(statement, params)
      : lanes.run

    /**
     * The statement, run again after a deadlock or a serialisation failure: at most `maxRetries`
     * times, 2, 4, 8… ms apart. Built by hand rather than with `Effect.retry` and a `Schedule`, whose
     * driver would be set up for every call although nearly all succeed the first time.
     */
    const run = (
      statement: string,
      params: ReadonlyArray<unknown>,
      retried: number
    ): Effect.Effect<ReadonlyArray<unknown>, unknown> =>
      Effect.catchIf(
        execute(statement, params),
        (error) => retried < maxRetries && isRetryable(error),
        () => Effect.zipRight(Effect.sleep(Duration.millis(2 * 2 ** retried)), run(statement, params, retried + 1))
      )

    /**
     * The loss a routine found is logged once, by the call that found it: from then on acquires answer
     * "held" until the lock-delay has passed, which would otherwise look like a hang.
     */
    const logLoss = Effect.logError(
      `simba postgres: the database lost its unlogged table ${prefix}boot (a crash restart, or a replica ` +
        `promoted): commits of the last moments before it may be lost, so no lease is granted for the lockDelay ` +
        `of ${lockDelayMillis} ms; sessions the database forgot end as expired`
    ).pipe(Effect.annotateLogs({ backend }))
    /** One round trip: the routine of `operation` with `params`, retried after a deadlock; the reply read. */
    const call = (operation: keyof typeof statements, params: ReadonlyArray<unknown>): Effect.Effect<Reply, unknown> =>
      Effect.flatMap(run(statements[operation], params, 0), (rows) => {
        const reply = readReply(firstRow(backend, rows))
        return Either.isRight(reply) && reply.right.lost ? Effect.as(logLoss, reply.right) : reply
      })
    const remainingOf = (reply: Reply) => Duration.millis(Math.max(0, reply.remaining ?? 0))
    const unexpected = (operation: string, reply: Reply) =>
      Effect.fail(`unexpected reply to ${operation}: ${reply.status}`)

    const openSession = (ttlMillis: number): Effect.Effect<OpenedSession, unknown> => {
      const sessionId = newSessionId()
      return Effect.flatMap(call("open", [sessionId, ttlMillis]), (reply) =>
        reply.status === "live"
          ? Effect.succeed({ sessionId, remaining: remainingOf(reply) })
          : unexpected("openSession", reply))
    }

    const keepAlive = (sessionId: string, ttlMillis: number, known: string | undefined) =>
      Effect.flatMap(
        // A version this backend never gave (not a number) is no version: the list comes back.
        call("keep_alive", [sessionId, ttlMillis, known !== undefined && versionPattern.test(known) ? known : null]),
        (reply): Effect.Effect<KeepAliveReply, unknown> => {
          if (reply.status === "expired") return Effect.succeed(KeepAliveReply.Expired())
          if (reply.status !== "live" || reply.version === undefined) {
            return unexpected("keepAlive", reply)
          }
          const leases = reply.leases === undefined
            ? undefined
            : Either.getOrUndefined(Either.all(reply.leases.map(([name, token]) =>
              tokenPattern.test(token) ? Either.right({ name, token: BigInt(token) }) : Either.left(token)
            )))
          if (leases === undefined && reply.leases !== undefined) {
            return Effect.fail("the renewal lists a lease without a valid token")
          }
          return Effect.succeed(KeepAliveReply.Live({
            remaining: remainingOf(reply),
            version: reply.version,
            leases: leases === undefined ? undefined : [...leases].sort((a, b) => byName(a.name, b.name)),
            groups: groupViews(reply.groups ?? [])
          }))
        }
      )

    const acquire = (sessionId: string, name: string, reserve: number) =>
      Effect.flatMap(call("acquire", pg ? [sessionId, name, lockDelayMillis, reserve] : [sessionId, name, reserve]), (reply): Effect.Effect<AcquireReply, unknown> => {
        switch (reply.status) {
          case "expired":
            return Effect.succeed(AcquireReply.Expired())
          case "granted":
            return Effect.zipRight(
              waiting.forget(name),
              Either.map(tokenOf(reply), (token) =>
                reply.reserved !== undefined && reply.reserved > 1
                  ? AcquireReply.Granted({ token, reserved: reply.reserved })
                  : AcquireReply.Granted({ token }))
            )
          case "held":
            return Effect.as(waiting.refused(name), AcquireReply.HeldBy({
              token: reply.token !== undefined && tokenPattern.test(reply.token)
                ? BigInt(reply.token)
                : undefined,
              remaining: reply.remaining === undefined ? undefined : remainingOf(reply)
            }))
          case "conflict":
            return reply.held !== undefined && reply.asked !== undefined
              ? Effect.succeed(AcquireReply.Conflict({ held: reply.held, asked: reply.asked }))
              : unexpected("acquire", reply)
          default:
            return unexpected("acquire", reply)
        }
      })

    const join = (sessionId: string, group: string) =>
      Effect.flatMap(call("join", [sessionId, group]), (reply): Effect.Effect<JoinReply, unknown> =>
        reply.status === "joined"
          ? Effect.succeed("Joined")
          : reply.status === "expired"
          ? Effect.succeed("Expired")
          : unexpected("join", reply))

    /**
     * Hints without a push channel: a release through this backend, and a poll, while local
     * candidates wait, of which of their names are free now: one query per `pollInterval` for all of
     * them (at most `Waiting.max` names), whatever their number; none while nobody waits.
     */
    const localHints = settings.hints === undefined
      ? yield* Effect.acquireRelease(makeHintHub(4096), (hub) => hub.shutdown)
      : undefined
    if (localHints !== undefined) {
      const poll = Effect.gen(function*() {
        const names = yield* waiting.current
        if (names.length === 0) return
        const free = yield* sql.unsafe<{ name: string; to: string | null }>(
          MysqlMigrations.mysqlFreeNames(prefix, names.length),
          MysqlMigrations.mysqlFreeParams(names)
        )
        for (const { name, to } of free) {
          yield* waiting.forget(name)
          // A pool's queue: only its first waiter (`to`) would be granted.
          localHints.emit(Hint.Released({ name, to: to ?? undefined }))
        }
      })
      yield* poll.pipe(
        // A failed poll only delays a wake-up: candidates still retry on their own.
        Effect.catchAllCause(() => Effect.void),
        Effect.repeat(Schedule.spaced(settings.pollInterval ?? Duration.millis(60))),
        Effect.forkScoped
      )
    }
    const hints = localHints === undefined ? settings.hints ?? Stream.empty : localHints.hints

    // The dialect of the client, as for the schema.
    const queries = sql.onDialectOrElse({
      pg: () => inspectQueries("postgres", prefix),
      orElse: () => inspectQueries("mysql", prefix)
    })
    /**
     * One read per table, in turn, outside any transaction of ours: each is consistent in itself;
     * together they may straddle a change (a holder may expire between the lease and session reads),
     * which an operator's view, stale once printed, tolerates. Not retried: a plain read takes no locks.
     */
    const inspect: Effect.Effect<Inventory, unknown> = Effect.gen(function*() {
      const sessions = yield* readRows("sessions", yield* sql.unsafe(queries.sessions), readSession)
      const leases = yield* readRows("leases", yield* sql.unsafe(queries.leases), readLease)
      const waiters = queries.waiters === undefined
        ? new Map<string, ReadonlyArray<string>>()
        : byKeyOf(yield* readRows("waiters", yield* sql.unsafe(queries.waiters), readPair("name")))
      const members = yield* readRows("members", yield* sql.unsafe(queries.members), readPair("group_name"))
      return {
        sessions,
        leases: leases.map((lease) => ({ ...lease, waiters: waiters.get(lease.name) ?? [] })),
        groups: groupViews(members)
      }
    })
    return makeBackend({
      backend,
      holds: settings.holds === true,
      isSessionId,
      openSession,
      keepAlive,
      closeSession: (sessionId) => Effect.asVoid(call("close", [sessionId])),
      acquire,
      release: (sessionId, name, token) =>
        Effect.flatMap(call("release", [sessionId, name, token.toString(), ...delayParam]), (reply) =>
          // Without pushed hints, local candidates hear of a release made through this backend at once.
          reply.status === "released" && localHints !== undefined
            ? Effect.sync(() => localHints.emit(Hint.Released({ name })))
            : Effect.void),
      // PostgreSQL queues refused sessions (`<prefix>waiter`, and a pool's queue, which its routine
      // then serves); MySQL queues only a pool's waiters (`<prefix>pool_waiter`), served by their poll.
      withdraw: sql.onDialectOrElse({
        pg: () => (sessionId: string, name: string) =>
          Effect.asVoid(run(`SELECT ${schema.routine("withdraw")}($1, $2) AS r`, [sessionId, name], 0)),
        orElse: () => (sessionId: string, name: string) =>
          Effect.asVoid(execute(`DELETE FROM ${Migrations.tables(prefix).poolWaiter} WHERE name = ? AND session_id = ?`, [name, sessionId]))
      }),
      join,
      leave: (sessionId, group) => Effect.asVoid(call("leave", [sessionId, group])),
      members: (group) =>
        Effect.map(call("members", [group]), (reply) => [...(reply.members ?? [])].sort(byName)),
      hints,
      inspect
    })
  })
