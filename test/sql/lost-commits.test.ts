/**
 * PostgreSQL commits without a WAL flush, and what keeps that safe (docs/sql.md, "Commits without a
 * flush"): which routines commit with `synchronous_commit = off`, and the lock-delay that starts when
 * a routine finds the unlogged `<prefix>boot` table empty, as PostgreSQL leaves it after a crash and
 * as a promoted replica has it. Here the table is emptied by hand (`TRUNCATE`), which is what the
 * crash recovery does to it; test/sql/restart.test.ts crashes a real server.
 */
import * as PgClient from "@effect/sql-pg/PgClient"
import { SqlClient } from "@effect/sql/SqlClient"
import { describe, expect, it } from "@effect/vitest"
import * as Context from "effect/Context"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Logger from "effect/Logger"
import * as Redacted from "effect/Redacted"
import { randomBytes } from "node:crypto"
import { type AcquireReply, LeaseBackend } from "../../src/LeaseBackend.js"
import * as Migrations from "../../src/layers/sql/migrations.js"
import * as PgBackend from "../../src/layers/sql/PgBackend.js"
import { pgUrl } from "./SqlServers.js"
import { granted, live } from "../support/replies.js"
import { dropPostgresPrefix } from "../support/freshSchemas.js"

const raw = PgClient.layer({ url: Redacted.make(pgUrl), maxConnections: 2 })
const ttl = Duration.millis(4000)
const lockDelay = 1500

const heldFor = (reply: AcquireReply): number => {
  if (reply._tag !== "HeldBy" || reply.remaining === undefined) expect.fail(`expected HeldBy with a time left, got ${reply._tag}`)
  return Duration.toMillis(reply.remaining)
}

/** A fresh table prefix, its tables and routines dropped after `test`. */
const withPrefix = <A, E>(test: (prefix: string) => Effect.Effect<A, E, SqlClient>) => {
  const prefix = `simba_t_lc${randomBytes(4).toString("hex")}_`
  return test(prefix).pipe(Effect.ensuring(Effect.orDie(dropPostgresPrefix(prefix))), Effect.provide(raw))
}

/** The backend, open for the scope. */
const backendOn = (options: PgBackend.PgOptions) =>
  Effect.map(Layer.build(PgBackend.layer(options)), (context) => Context.get(context, LeaseBackend))

const unique = (label: string) => `lc.${randomBytes(6).toString("hex")}.${label}`

describe("PostgreSQL commits without a flush", () => {
  it.live("grants, releases, renewals, opens and closes commit with synchronous_commit off; joins and leaves wait for the flush", () =>
    withPrefix((prefix) =>
      Effect.gen(function*() {
        yield* Effect.scoped(Layer.build(PgBackend.layer({ url: pgUrl, tablePrefix: prefix })))
        const sql = yield* SqlClient
        const fn = (operation: string) => Migrations.routine(prefix, Migrations.postgresVersion, operation)
        const sid = randomBytes(16).toString("hex")
        const name = unique("flush")
        /** The setting the transaction that ran `call` commits with. */
        const settingOf = (call: string, params: ReadonlyArray<unknown>) =>
          sql.withTransaction(Effect.gen(function*() {
            yield* sql.unsafe(`SELECT ${call} AS r`, params)
            const rows = yield* sql.unsafe<{ synchronous_commit: string }>("SHOW synchronous_commit")
            return rows[0]?.synchronous_commit
          }))
        expect(yield* settingOf(`${fn("open")}($1, $2)`, [sid, 4000])).toBe("off")
        expect(yield* settingOf(`${fn("acquire")}($1, $2, $3, $4)`, [sid, name, lockDelay, 1])).toBe("off")
        expect(yield* settingOf(`${fn("keep_alive")}($1, $2, $3)`, [sid, 4000, null])).toBe("off")
        const token = (yield* sql.unsafe<{ token: string }>(`SELECT token::text AS token FROM ${prefix}lease WHERE name = $1`, [name]))[0]!.token
        expect(yield* settingOf(`${fn("release")}($1, $2, $3, $4)`, [sid, name, token, lockDelay])).toBe("off")
        expect(yield* settingOf(`${fn("join")}($1, $2)`, [sid, "g"])).toBe("on")
        expect(yield* settingOf(`${fn("leave")}($1, $2)`, [sid, "g"])).toBe("on")
        expect(yield* settingOf(`${fn("close")}($1)`, [sid])).toBe("off")
        // The setting stays with the routine's transaction: the connection's own is untouched after it.
        expect((yield* sql.unsafe<{ synchronous_commit: string }>("SHOW synchronous_commit"))[0]?.synchronous_commit).toBe("on")
      })), 30_000)

  it.live("an emptied boot table stops every grant for the lock-delay (hand-offs and its own lease included); then tokens rise, and a lease held since before the loss comes back with a new token", () =>
    withPrefix((prefix) =>
      Effect.gen(function*() {
        const sql = yield* SqlClient
        const b = yield* backendOn({ url: pgUrl, tablePrefix: prefix, lockDelay: `${lockDelay} millis` })
        const s1 = (yield* b.openSession(ttl)).sessionId
        const s2 = (yield* b.openSession(ttl)).sessionId
        const [own, queued, fresh] = [unique("own"), unique("queued"), unique("fresh")]
        const ownToken = granted(yield* b.acquire(s1, own))
        const queuedToken = granted(yield* b.acquire(s1, queued))
        // s2 waits in the queue of `queued`: a release would hand it over.
        expect((yield* b.acquire(s2, queued))._tag).toBe("HeldBy")

        // What a crash restart does to an unlogged table.
        yield* sql.unsafe(`TRUNCATE ${prefix}boot`)
        const left = heldFor(yield* b.acquire(s2, fresh))
        expect(left).toBeGreaterThan(lockDelay - 500)
        expect(left).toBeLessThanOrEqual(lockDelay)
        // Its own lease (the release that ended its term may be what was lost): no grant either.
        heldFor(yield* b.acquire(s1, own))
        // A release frees the lease and hands it to nobody during the delay.
        yield* b.release(s1, queued, queuedToken)
        const holder = yield* sql.unsafe<{ session_id: string | null }>(`SELECT session_id FROM ${prefix}lease WHERE name = $1`, [queued])
        expect(holder[0]?.session_id).toBeNull()
        heldFor(yield* b.acquire(s2, queued))
        // An older client's routine is this version's: no grant during the delay for it either.
        const older = yield* sql.unsafe<{ r: { status: string } }>(
          `SELECT ${Migrations.routine(prefix, 3, "acquire")}($1, $2) AS r`,
          [s2, unique("older")]
        )
        expect(older[0]?.r.status).toBe("held")
        // Sessions live on through the delay.
        live(yield* b.keepAlive(s1, ttl))
        live(yield* b.keepAlive(s2, ttl))

        yield* Effect.sleep(Duration.millis(left + 50))
        const ownAgain = granted(yield* b.acquire(s1, own))
        expect(ownAgain).toBeGreaterThan(ownToken)
        // Granted after the loss: the same term when asked again.
        expect(granted(yield* b.acquire(s1, own))).toBe(ownAgain)
        expect(granted(yield* b.acquire(s2, queued))).toBeGreaterThan(queuedToken)
        const freshToken = granted(yield* b.acquire(s2, fresh))
        // Floored by the database clock: above every token granted before.
        expect(freshToken).toBeGreaterThan(queuedToken)
        yield* b.closeSession(s1)
        yield* b.closeSession(s2)
      }).pipe(Effect.scoped)), 30_000)

  it.live("an older client, calling schema version 3's routines, is served by this version's: clock-floored tokens, one order of tokens with a new client", () =>
    withPrefix((prefix) =>
      Effect.gen(function*() {
        const sql = yield* SqlClient
        const b = yield* backendOn({ url: pgUrl, tablePrefix: prefix, lockDelay: `${lockDelay} millis` })
        const v3 = (operation: string) => Migrations.routine(prefix, 3, operation)
        type Reply = { readonly status: string; readonly token?: string; readonly leases?: ReadonlyArray<readonly [string, string]> }
        const call = (routine: string, params: ReadonlyArray<unknown>) =>
          Effect.map(
            sql.unsafe<{ r: Reply }>(`SELECT ${routine}(${params.map((_, i) => `$${i + 1}`).join(", ")}) AS r`, params),
            (rows) => rows[0]!.r
          )
        const older = randomBytes(16).toString("hex")
        const name = unique("older")
        expect((yield* call(v3("open"), [older, 4000])).status).toBe("live")
        const before = Date.now()
        const grant = yield* call(v3("acquire"), [older, name])
        expect(grant.status).toBe("granted")
        const olderToken = BigInt(grant.token!)
        expect(olderToken).toBeGreaterThanOrEqual(BigInt(before - 5000) * 1000n)
        expect((yield* call(v3("keep_alive"), [older, 4000, null])).leases).toEqual([[name, grant.token]])
        // A new client waits behind the older one, and is handed the lease by its release.
        const newer = (yield* b.openSession(ttl)).sessionId
        expect((yield* b.acquire(newer, name))._tag).toBe("HeldBy")
        expect((yield* call(v3("release"), [older, name, grant.token])).status).toBe("released")
        const handed = live(yield* b.keepAlive(newer, ttl)).leases
        expect(handed?.map((lease) => lease.name)).toEqual([name])
        expect(handed![0]!.token).toBeGreaterThan(olderToken)
        expect((yield* call(v3("close"), [older])).status).toBe("ok")
        yield* b.closeSession(newer)
      }).pipe(Effect.scoped)), 30_000)

  it.live("an upgrade from schema version 4: its lease table gains the cached column, its routines become this version's (one token each), its tokens stay below the new ones", () =>
    withPrefix((prefix) =>
      Effect.gen(function*() {
        const sql = yield* SqlClient
        // What version 4 left: a lease table without the column, a held name's row, its plpgsql acquire.
        yield* sql.unsafe(`CREATE TABLE ${prefix}lease (
  name varchar(128) PRIMARY KEY, session_id varchar(32), token bigint NOT NULL DEFAULT 0, acquired_at timestamptz)`)
        const name = unique("upgraded")
        const oldToken = BigInt(Date.now() + 60_000) * 1000n
        yield* sql.unsafe(`INSERT INTO ${prefix}lease (name, session_id, token) VALUES ($1, NULL, $2)`, [name, oldToken.toString()])
        const v4 = (operation: string) => Migrations.routine(prefix, 4, operation)
        yield* sql.unsafe(`CREATE FUNCTION ${v4("acquire")}(p_sid varchar, p_name varchar, p_delay bigint) RETURNS json
          LANGUAGE plpgsql AS $f$ BEGIN RETURN json_build_object('status', 'old'); END $f$`)
        const b = yield* backendOn({ url: pgUrl, tablePrefix: prefix, lockDelay: 0 })
        type Reply = { readonly status: string; readonly token?: string; readonly reserved?: number }
        const call = (routine: string, params: ReadonlyArray<unknown>) =>
          Effect.map(
            sql.unsafe<{ r: Reply }>(`SELECT ${routine}(${params.map((_, i) => `$${i + 1}`).join(", ")}) AS r`, params),
            (rows) => rows[0]!.r
          )
        const older = randomBytes(16).toString("hex")
        expect((yield* call(v4("open"), [older, 4000])).status).toBe("live")
        // The old acquire is this version's now: a grant of one token, above the row's.
        const grant = yield* call(v4("acquire"), [older, name, 0])
        expect(grant.status).toBe("granted")
        expect(grant.reserved).toBe(1)
        expect(BigInt(grant.token!)).toBe(oldToken + 1n)
        expect((yield* call(v4("release"), [older, name, grant.token, 0])).status).toBe("released")
        // A new client's grant reserves its block above it, and is told when wanted.
        const newer = (yield* b.openSession(ttl)).sessionId
        const blocked = yield* b.acquire(newer, name, 16)
        expect(blocked).toMatchObject({ _tag: "Granted", reserved: 16, token: oldToken + 17n })
        const cached = yield* sql.unsafe<{ cached: boolean }>(`SELECT cached FROM ${prefix}lease WHERE name = $1`, [name])
        expect(cached[0]?.cached).toBe(true)
        expect((yield* call(v4("acquire"), [older, name, 0])).status).toBe("held")
        expect((yield* call(v4("close"), [older])).status).toBe("ok")
        yield* b.closeSession(newer)
      }).pipe(Effect.scoped)), 30_000)

  it.live("a lock-delay of 0 finds the loss and grants at once; a bad lockDelay is a SimbaConfigError", () =>
    withPrefix((prefix) =>
      Effect.gen(function*() {
        const sql = yield* SqlClient
        const b = yield* backendOn({ url: pgUrl, tablePrefix: prefix, lockDelay: 0 })
        const sid = (yield* b.openSession(ttl)).sessionId
        yield* sql.unsafe(`TRUNCATE ${prefix}boot`)
        // The call that finds the loss logs it at Error, once.
        const logs: Array<string> = []
        const capture = Logger.replace(
          Logger.defaultLogger,
          Logger.make(({ logLevel, message }) => logs.push(`${logLevel.label} ${String(message)}`))
        )
        yield* Effect.gen(function*() {
          granted(yield* b.acquire(sid, unique("zero")))
          granted(yield* b.acquire(sid, unique("zero")))
        }).pipe(Effect.provide(capture))
        expect(logs.filter((line) => line.startsWith("ERROR") && line.includes(`${prefix}boot`))).toHaveLength(1)
        yield* b.closeSession(sid)
        const bad = yield* Effect.flip(Layer.build(PgBackend.layer({ url: pgUrl, tablePrefix: prefix, lockDelay: "soon" as "1s" })))
        expect(bad._tag).toBe("SimbaConfigError")
        expect(String(bad.message)).toContain("lockDelay")
      }).pipe(Effect.scoped)), 30_000)
})
