/**
 * PostgreSQL holds (schema version 6, `src/layers/sql/pgPools.ts`) beyond the TCK: server-side grants
 * of queued holds pushed as hand-offs (`h:<session>:<token>:<name>`), a withdrawal that serves the
 * pool, a closing session that ends its holds and serves its pools, holds listed by `inspect`, and
 * the routines of schema version 5 (a client of the previous release, during a rolling upgrade)
 * still answering once version 6 is installed.
 */
import * as PgClient from "@effect/sql-pg/PgClient"
import { SqlClient } from "@effect/sql/SqlClient"
import { describe, expect, it } from "@effect/vitest"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Redacted from "effect/Redacted"
import { randomBytes } from "node:crypto"
import { type Hint, LeaseBackend } from "../../src/LeaseBackend.js"
import * as LeaseName from "../../src/LeaseName.js"
import * as Migrations from "../../src/layers/sql/migrations.js"
import * as PgBackend from "../../src/layers/sql/PgBackend.js"
import { pgUrl } from "./SqlServers.js"
import { granted, heardHints, hintsFlow, live } from "../support/replies.js"
import { dropPostgresPrefix } from "../support/freshSchemas.js"

const ttl = Duration.millis(4000)
const raw = PgClient.layer({ url: Redacted.make(pgUrl), maxConnections: 2 })
const backend = PgBackend.layer({ url: pgUrl, tablePrefix: "simba_t_pgh_" })

const unique = (label: string) => `pgh.${randomBytes(6).toString("hex")}.${label}`
const permits = (pool: string, weight: number, limit: number, id: string) =>
  LeaseName.holdName({ pool, mode: "permits", weight, limit, id })
const read = (pool: string, id: string) => LeaseName.holdName({ pool, mode: "read", weight: 1, limit: 0, id })

/** The hints of the backend, recorded from now on; `ready` returns once the listener is up. */
const heardHintsReady = Effect.gen(function*() {
  const b = yield* LeaseBackend
  const { waitFor } = yield* heardHints
  const ready = hintsFlow(waitFor, () => unique("warm-up"), ttl).pipe(Effect.provideService(LeaseBackend, b))
  return { waitFor, ready }
})

const grantedTo = (name: string, to: string) => (hint: Hint) => hint._tag === "Granted" && hint.name === name && hint.to === to

describe("PostgreSQL holds", () => {
  it.live("a release grants the queue's head in its transaction and pushes it; the waiter's renewal lists it", () =>
    Effect.gen(function*() {
      const b = yield* LeaseBackend
      const { ready, waitFor } = yield* heardHintsReady
      yield* ready
      const pool = unique("sem")
      const [a, w] = [(yield* b.openSession(ttl)).sessionId, (yield* b.openSession(ttl)).sessionId]
      const big = permits(pool, 2, 2, "a")
      const small = permits(pool, 1, 2, "w")
      const first = granted(yield* b.acquire(a, big))
      const refused = yield* b.acquire(w, small)
      expect(refused._tag).toBe("HeldBy")
      if (refused._tag === "HeldBy") expect(refused.token).toBe(first)
      yield* b.release(a, big, first)
      yield* waitFor(grantedTo(small, w))
      const leases = live(yield* b.keepAlive(w, ttl)).leases ?? []
      expect(leases.map((lease) => lease.name)).toEqual([small])
      expect(leases[0]!.token).toBeGreaterThan(first)
      // Asking again (the waiter had not heard yet) is answered the same grant.
      expect(granted(yield* b.acquire(w, small))).toBe(leases[0]!.token)
      yield* b.closeSession(a)
      yield* b.closeSession(w)
    }).pipe(Effect.provide(backend), Effect.scoped), 30_000)

  it.live("a withdrawal takes a waiter out of the pool's queue and serves the pool: the one behind it is granted", () =>
    Effect.gen(function*() {
      const b = yield* LeaseBackend
      const { ready, waitFor } = yield* heardHintsReady
      yield* ready
      const pool = unique("withdraw")
      const [a, big, small] = [
        (yield* b.openSession(ttl)).sessionId,
        (yield* b.openSession(ttl)).sessionId,
        (yield* b.openSession(ttl)).sessionId
      ]
      granted(yield* b.acquire(a, permits(pool, 1, 2, "a")))
      expect((yield* b.acquire(big, permits(pool, 2, 2, "big")))._tag).toBe("HeldBy")
      // It fits, but waits behind the 2-permit request.
      expect((yield* b.acquire(small, permits(pool, 1, 2, "small")))._tag).toBe("HeldBy")
      yield* b.withdraw(big, permits(pool, 2, 2, "big"))
      yield* waitFor(grantedTo(permits(pool, 1, 2, "small"), small))
      expect(live(yield* b.keepAlive(big, ttl)).leases).toEqual([])
      for (const sid of [a, big, small]) yield* b.closeSession(sid)
    }).pipe(Effect.provide(backend), Effect.scoped), 30_000)

  it.live("a closing reader ends its hold and the writer queued behind it is granted the plain lease, pushed", () =>
    Effect.gen(function*() {
      const b = yield* LeaseBackend
      const { ready, waitFor } = yield* heardHintsReady
      yield* ready
      const pool = unique("rw")
      const [reader, writer, late] = [
        (yield* b.openSession(ttl)).sessionId,
        (yield* b.openSession(ttl)).sessionId,
        (yield* b.openSession(ttl)).sessionId
      ]
      const readToken = granted(yield* b.acquire(reader, read(pool, "r1")))
      expect((yield* b.acquire(writer, pool))._tag).toBe("HeldBy")
      // A reader arriving after the waiting writer waits behind it.
      expect((yield* b.acquire(late, read(pool, "r2")))._tag).toBe("HeldBy")
      const inventory = yield* b.inspect!
      expect(inventory.leases.find((lease) => lease.name === read(pool, "r1"))).toMatchObject({ holder: reader, token: readToken })
      yield* b.closeSession(reader)
      yield* waitFor(grantedTo(pool, writer))
      const writeLeases = live(yield* b.keepAlive(writer, ttl)).leases ?? []
      expect(writeLeases.map((lease) => lease.name)).toEqual([pool])
      expect(writeLeases[0]!.token).toBeGreaterThan(readToken)
      expect(live(yield* b.keepAlive(late, ttl)).leases).toEqual([])
      // The writer's release serves the pool: the late reader, with a token above the writer's.
      yield* b.release(writer, pool, writeLeases[0]!.token)
      yield* waitFor(grantedTo(read(pool, "r2"), late))
      const readLeases = live(yield* b.keepAlive(late, ttl)).leases ?? []
      expect(readLeases.map((lease) => lease.name)).toEqual([read(pool, "r2")])
      expect(readLeases[0]!.token).toBeGreaterThan(writeLeases[0]!.token)
      yield* b.closeSession(writer)
      yield* b.closeSession(late)
      // Nothing holds or waits: the pool is forgotten, the name is a plain lock again.
      const plain = (yield* b.openSession(ttl)).sessionId
      expect(granted(yield* b.acquire(plain, pool))).toBeGreaterThan(readLeases[0]!.token)
      yield* b.closeSession(plain)
    }).pipe(Effect.provide(backend), Effect.scoped), 30_000)

  it.live("a hold of a session found gone is dropped by the next call on its pool", () =>
    Effect.gen(function*() {
      const b = yield* LeaseBackend
      const pool = unique("gone")
      const short = (yield* b.openSession(Duration.millis(300))).sessionId
      const other = (yield* b.openSession(ttl)).sessionId
      granted(yield* b.acquire(short, permits(pool, 2, 2, "short")))
      expect((yield* b.acquire(other, permits(pool, 2, 2, "other")))._tag).toBe("HeldBy")
      yield* Effect.sleep(Duration.millis(600))
      granted(yield* b.acquire(other, permits(pool, 2, 2, "other")))
      yield* b.closeSession(other)
    }).pipe(Effect.provide(backend), Effect.scoped), 30_000)
})

describe(`PostgreSQL schema version ${Migrations.postgresVersion} and a client of an earlier version`, () => {
  it.live.each([5, 6])("version %i's routines call this version's: open, acquire with a block, the FIFO hand-off, renewal (a release of its own seen), withdraw (version 6's clients), close", (version) => {
    const prefix = `simba_t_v${version}${randomBytes(4).toString("hex")}_`
    const dropAll = dropPostgresPrefix(prefix)
    return Effect.gen(function*() {
      // This version installs its routines and makes the earlier versions' wrappers.
      yield* Effect.scoped(Layer.build(PgBackend.layer({ url: pgUrl, tablePrefix: prefix })))
      const sql = yield* SqlClient
      const older = (operation: string) => Migrations.routine(prefix, version, operation)
      const call = (operation: string, params: ReadonlyArray<unknown>) =>
        Effect.map(
          sql.unsafe<{ r: Record<string, unknown> }>(
            `SELECT ${older(operation)}(${params.map((_, i) => `$${i + 1}`).join(", ")}) AS r`,
            params
          ),
          (rows) => rows[0]!.r
        )
      // A client of that version finds its marker: its migration installs nothing.
      const marker = yield* sql.unsafe<{ installed: boolean }>("SELECT to_regproc($1) IS NOT NULL AS installed", [older("members")])
      expect(marker[0]!.installed).toBe(true)
      const [a, w] = [randomBytes(16).toString("hex"), randomBytes(16).toString("hex")]
      const name = unique("v5")
      expect(yield* call("open", [a, 4000])).toMatchObject({ status: "live" })
      expect(yield* call("open", [w, 4000])).toMatchObject({ status: "live" })
      const grant = yield* call("acquire", [a, name, 1500, 4])
      expect(grant).toMatchObject({ status: "granted", reserved: 4 })
      expect(yield* call("acquire", [w, name, 1500, 1])).toMatchObject({ status: "held" })
      const renewal = yield* call("keep_alive", [a, 4000, null])
      expect(renewal).toMatchObject({ status: "live", leases: [[name, grant["token"]]] })
      expect(yield* call("release", [a, name, grant["token"], 1500])).toMatchObject({ status: "released" })
      // Its own release moved its lease set's version on: the renewal naming the old one lists it.
      expect(yield* call("keep_alive", [a, 4000, renewal["version"]])).toMatchObject({ status: "live", leases: [] })
      // Handed to the waiter in the release's transaction, with a larger token.
      const handed = yield* call("keep_alive", [w, 4000, null])
      const leases = handed["leases"] as ReadonlyArray<readonly [string, string]>
      expect(leases.map(([leased]) => leased)).toEqual([name])
      expect(BigInt(leases[0]![1])).toBeGreaterThan(BigInt(grant["token"] as string))
      expect(yield* call("join", [w, `${name}.g`])).toMatchObject({ status: "joined" })
      expect(yield* call("members", [`${name}.g`])).toMatchObject({ status: "ok", members: [w] })
      expect(yield* call("leave", [w, `${name}.g`])).toMatchObject({ status: "ok" })
      if (version >= 6) {
        // Version 6's clients also withdraw from a queue.
        const other = unique("v6-withdraw")
        const held = yield* call("acquire", [w, other, 1500, 1])
        expect(held).toMatchObject({ status: "granted" })
        expect(yield* call("acquire", [a, other, 1500, 1])).toMatchObject({ status: "held" })
        expect(yield* call("withdraw", [a, other])).toMatchObject({ status: "ok" })
        expect(yield* call("release", [w, other, held["token"], 1500])).toMatchObject({ status: "released" })
        // Withdrawn: the release handed it to nobody.
        expect((yield* call("keep_alive", [a, 4000, null]))["leases"]).toEqual([])
      }
      expect(yield* call("close", [w])).toMatchObject({ status: "ok" })
      expect(yield* call("close", [a])).toMatchObject({ status: "ok" })
      expect(yield* call("keep_alive", [w, 4000, null])).toMatchObject({ status: "expired" })
    }).pipe(Effect.ensuring(Effect.orDie(dropAll)), Effect.provide(raw))
  }, 30_000)
})
