/**
 * Three Node processes elect one leader on each database (examples/pg-leader.ts on SimbaPgLive,
 * test/sql/mysql-leader.ts on SimbaMysqlLive), each in its own process group (signalled as a group,
 * only these pids), writing to a fenced log in the same database:
 *
 * - `kill -9` of the leader: its session expires on the database's clock (at most `leaseDuration`
 *   after its last renewal); one new leader, with a larger token;
 * - SIGSTOP of the new leader past its lease: the third process leads; on SIGCONT the paused process
 *   finds its term ended (its local deadline passed) and competes again on a new session;
 * - SIGTERM of the leader: the lease is released and the waiting process leads at once (PostgreSQL:
 *   the NOTIFY; MySQL: the waiter's 60 ms poll), long before any expiry;
 * - the fenced log: in the order the database applied the writes, tokens never go down, and each
 *   token is one process's.
 *
 * Bounds: a crash is detected once the holder's session expires, at most `leaseDuration` after its
 * last renewal, so at most `leaseDuration` after the kill; the waiter then needs its next try (PG: its
 * retry, at most `renewInterval` later; MySQL: the next poll). Slack for a loaded 2-core machine
 * running other test files (event-loop stalls, stdout piping): 1 s.
 */
import { afterAll, describe, expect, it } from "@effect/vitest"
import { randomBytes } from "node:crypto"
import * as MysqlClient from "@effect/sql-mysql2/MysqlClient"
import * as PgClient from "@effect/sql-pg/PgClient"
import { SqlClient } from "@effect/sql/SqlClient"
import * as Effect from "effect/Effect"
import type * as Layer from "effect/Layer"
import * as Redacted from "effect/Redacted"
import { processes, sleep } from "../support/processes.js"
import { mysqlUrl, pgUrl } from "./SqlServers.js"

/** Runs one statement on a connection of its own. */
const query = (
  client: Layer.Layer<SqlClient, unknown>,
  text: string,
  params: ReadonlyArray<unknown>
): Promise<ReadonlyArray<{ entry: string }>> =>
  Effect.runPromise(
    Effect.flatMap(SqlClient, (sql) => sql.unsafe<{ entry: string }>(text, params)).pipe(
      Effect.provide(client),
      Effect.scoped
    )
  )
const pgClient = PgClient.layer({ url: Redacted.make(pgUrl), maxConnections: 1 })
const mysqlClient = MysqlClient.layer({ url: Redacted.make(mysqlUrl), maxConnections: 1 })

const leaseDuration = 2000
const renewInterval = Math.round(leaseDuration / 3)
const expiryBound = leaseDuration + renewInterval + 1000

interface Dialect {
  readonly label: string
  readonly script: string
  readonly env: Record<string, string>
  /** The fenced log's rows in the order the database applied them: `[token, pid]`. */
  readonly readLog: (log: string) => Promise<ReadonlyArray<readonly [string, string]>>
  readonly cleanUp: (log: string) => Promise<void>
}

const dialects: ReadonlyArray<Dialect> = [
  {
    label: "PostgreSQL",
    script: "examples/pg-leader.ts",
    env: { SIMBA_PG_URL: pgUrl, SIMBA_PG_TABLE_PREFIX: "simba_t_mp_" },
    readLog: async (log) =>
      (await query(pgClient, "SELECT entry FROM simba_example_log WHERE log = $1 ORDER BY id", [log]))
        .map((row) => entryOf(row.entry)),
    cleanUp: async (log) => {
      await query(pgClient, "DELETE FROM simba_example_log WHERE log = $1", [log]).catch(() => undefined)
      await query(pgClient, "DELETE FROM simba_example_fence WHERE log = $1", [log]).catch(() => undefined)
    }
  },
  {
    label: "MariaDB",
    script: "test/sql/mysql-leader.ts",
    env: { SIMBA_MYSQL_URL: mysqlUrl, SIMBA_MYSQL_TABLE_PREFIX: "simba_t_mp_" },
    readLog: async (log) =>
      (await query(mysqlClient, "SELECT entry FROM simba_example_log WHERE log = ? ORDER BY id", [log]))
        .map((row) => entryOf(row.entry)),
    cleanUp: async (log) => {
      await query(mysqlClient, "DELETE FROM simba_example_log WHERE log = ?", [log]).catch(() => undefined)
      await query(mysqlClient, "DELETE FROM simba_example_fence WHERE resource = ?", [log]).catch(() => undefined)
    }
  }
]

/** `<token>:<pid>:<seq>` as written by the children. */
const entryOf = (entry: string): readonly [string, string] => {
  const [token, pid] = entry.split(":")
  return [token!, pid!]
}

const groups: Array<ReturnType<typeof processes>> = []

afterAll(() => Promise.all(groups.map((children) => children.stopAll())))

for (const dialect of dialects) {
  describe(`three processes on ${dialect.label}`, () => {
    it("kill -9, SIGSTOP past the lease, SIGTERM: one leader at a time, the fenced log never goes back", async () => {
      const suffix = randomBytes(6).toString("hex")
      const log = `mp-${suffix}`
      const children = processes()
      groups.push(children)
      const { lines, waitFor } = children
      const start = () => {
        children.spawnScript(dialect.script, {
          env: {
            ...dialect.env,
            LEADER_NAME: `mp-${suffix}`,
            FENCED_LOG: log,
            WRITE_EVERY_MS: "20",
            SIMBA_LEASE_DURATION: `${leaseDuration}ms`
          }
        })
      }
      const elected = () => lines.filter((l) => l.words[0] === "ELECTED")
      const signal = (pid: number, sig: NodeJS.Signals) => children.signal(pid, sig)

      try {
        for (let i = 0; i < 3; i++) start()
        await waitFor("three processes ready", () => lines.filter((l) => l.words[0] === "READY").length === 3, 60_000)
        await waitFor("a leader", () => elected().length >= 1, 10_000)
        await sleep(1500)
        expect(elected()).toHaveLength(1)
        const first = elected()[0]!

        // Crash: no goodbye; its session must expire on the database first.
        const killedAt = performance.now()
        signal(first.pid, "SIGKILL")
        await waitFor("a second leader", () => elected().length >= 2, expiryBound + 5000)
        const second = elected()[1]!
        const failover = second.at - killedAt
        expect(second.pid).not.toBe(first.pid)
        expect(failover).toBeLessThanOrEqual(expiryBound)
        expect(BigInt(second.words[1]!)).toBeGreaterThan(BigInt(first.words[1]!))
        await sleep(500)
        expect(elected()).toHaveLength(2)

        // Pause past the lease: its session expires on the database; the third process leads.
        const pausedAt = performance.now()
        signal(second.pid, "SIGSTOP")
        await waitFor("a third leader", () => elected().length >= 3, expiryBound + 5000)
        const third = elected()[2]!
        const takeover = third.at - pausedAt
        expect(third.pid).not.toBe(second.pid)
        expect(third.pid).not.toBe(first.pid)
        expect(takeover).toBeLessThanOrEqual(expiryBound)
        expect(BigInt(third.words[1]!)).toBeGreaterThan(BigInt(second.words[1]!))
        await sleep(Math.max(0, leaseDuration + 1000 - (performance.now() - pausedAt)))
        signal(second.pid, "SIGCONT")
        // The woken process ends its term (revoked) and competes again on a new session.
        await waitFor("the paused leader's revocation", () =>
          lines.some((l) => l.words[0] === "REVOKED" && l.pid === second.pid), 10_000)
        await sleep(leaseDuration)
        expect(elected()).toHaveLength(3)

        // Graceful stop: the lease is released; the waiting process leads at once.
        const stoppedAt = performance.now()
        signal(third.pid, "SIGTERM")
        await waitFor("a fourth leader", () => elected().length >= 4, 10_000)
        const fourth = elected()[3]!
        const handover = fourth.at - stoppedAt
        expect(fourth.pid).toBe(second.pid)
        expect(handover).toBeLessThan(leaseDuration / 2)
        expect(BigInt(fourth.words[1]!)).toBeGreaterThan(BigInt(third.words[1]!))
        const revokedThird = lines.find((l) => l.words[0] === "REVOKED" && l.pid === third.pid)
        expect(revokedThird).toBeDefined()
        expect(revokedThird!.at).toBeLessThanOrEqual(fourth.at)
        await sleep(300)
        await children.stopAll()

        // The fenced log, in the order the database applied the writes.
        const entries = await dialect.readLog(log)
        expect(entries.length).toBeGreaterThan(10)
        const owner = new Map<string, string>()
        let previous = 0n
        for (const [token, pid] of entries) {
          expect(BigInt(token)).toBeGreaterThanOrEqual(previous)
          previous = BigInt(token)
          expect(owner.get(token) ?? pid).toBe(pid)
          owner.set(token, pid)
        }
        expect(new Set(entries.map(([token]) => token)).size).toBe(4)
        // Only the paused process may have had a write in flight when it was stopped: the fence refused it.
        expect(lines.filter((l) => l.words[0] === "WRITE" && l.words[2] === "rejected" && l.pid !== second.pid))
          .toEqual([])
        console.log(
          `${dialect.label} multi-process: failover after kill -9 ${failover.toFixed(0)} ms, after SIGSTOP ` +
            `${takeover.toFixed(0)} ms (bound ${expiryBound} ms with 1 s slack), graceful handover ${handover.toFixed(1)} ms, ` +
            `${entries.length} fenced writes`
        )
      } finally {
        await children.stopAll()
        await dialect.cleanUp(log)
      }
    }, 120_000)
  })
}
