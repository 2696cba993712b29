/**
 * A database crash and restart mid-run, on private servers this file starts in temporary
 * directories on free loopback ports (PostgreSQL: initdb, run as the `postgres` user, stopped with
 * its own `pg_ctl`; MariaDB: mariadb-install-db, `mariadbd` run as `mysql`, killed by its pid): the
 * leader's term ends at its local deadline while the database is down, nobody is elected before
 * that, the pools (and PostgreSQL's LISTEN connection) recover, and tokens keep rising after the
 * restart (the lease rows survive the crash through the WAL / redo log).
 */
import { afterAll, beforeAll, describe, expect, it } from "@effect/vitest"
import * as Effect from "effect/Effect"
import * as Exit from "effect/Exit"
import * as Fiber from "effect/Fiber"
import * as Layer from "effect/Layer"
import * as Ref from "effect/Ref"
import * as Scope from "effect/Scope"
import { type ChildProcess, execFileSync, spawn } from "node:child_process"
import { chmodSync, mkdtempSync, rmSync } from "node:fs"
import { createServer } from "node:net"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { LeaseBackend } from "../../src/LeaseBackend.js"
import * as MysqlBackend from "../../src/layers/sql/MysqlBackend.js"
import * as PgBackend from "../../src/layers/sql/PgBackend.js"
import * as Simba from "../../src/Simba.js"

interface Server {
  readonly label: string
  /**
   * How long after the restart nothing is granted: PostgreSQL commits without a WAL flush, finds
   * after the crash that it may have lost some (its unlogged boot table is empty) and waits its
   * lockDelay; MariaDB's commits are durable.
   */
  readonly lockDelay: number
  readonly url: () => string
  readonly layer: (url: string) => Layer.Layer<LeaseBackend, unknown>
  readonly setUp: () => Promise<void>
  /** Starts (again) on the same data. */
  readonly start: () => Promise<void>
  /** Crashes it: no shutdown, no checkpoint. */
  readonly crash: () => void
  readonly tearDown: () => void
}

const freePort = () =>
  new Promise<number>((resolve) => {
    const server = createServer()
    server.listen(0, "127.0.0.1", () => {
      const address = server.address()
      server.close(() => resolve(typeof address === "object" && address !== null ? address.port : 0))
    })
  })

const privateDir = (label: string, owner: string) => {
  const dir = mkdtempSync(join(tmpdir(), `simba-${label}-restart-`))
  chmodSync(dir, 0o777)
  execFileSync("chown", [owner, dir])
  return dir
}

const postgres = (): Server => {
  let dir = ""
  let port = 0
  const asPostgres = (command: string, args: ReadonlyArray<string>) =>
    execFileSync("runuser", ["-u", "postgres", "--", join(pgBin, command), ...args], { stdio: "pipe", timeout: 60_000 })
  const pgCtl = (...args: ReadonlyArray<string>) => asPostgres("pg_ctl", ["-D", join(dir, "data"), ...args])
  const start = async () => {
    pgCtl("-w", "-l", join(dir, "log"), "-o", `-p ${port} -k ${dir} -c listen_addresses=127.0.0.1`, "start")
  }
  return {
    label: "PostgreSQL",
    lockDelay: pgLockDelay,
    url: () => `postgres://postgres@127.0.0.1:${port}/postgres`,
    layer: (url) => PgBackend.layer({ url, tablePrefix: "simba_t_rs_", lockDelay: `${pgLockDelay} millis` }),
    setUp: async () => {
      port = await freePort()
      dir = privateDir("pg", "postgres")
      asPostgres("initdb", ["-D", join(dir, "data"), "-A", "trust", "-U", "postgres", "--no-sync"])
      await start()
    },
    start,
    crash: () => pgCtl("-m", "immediate", "stop"),
    tearDown: () => {
      if (dir === "") return
      try {
        pgCtl("-m", "immediate", "stop")
      } catch {
        // not running
      }
      rmSync(dir, { recursive: true, force: true })
    }
  }
}

const mariadb = (): Server => {
  let dir = ""
  let port = 0
  let server: ChildProcess | undefined
  const answers = () => {
    try {
      execFileSync("mariadb", ["-uroot", "-h127.0.0.1", `-P${port}`, "-e", "CREATE DATABASE IF NOT EXISTS test"], { stdio: "pipe" })
      return true
    } catch {
      return false
    }
  }
  const start = async () => {
    server = spawn("/usr/sbin/mariadbd", [
      "--no-defaults",
      `--datadir=${join(dir, "data")}`,
      `--port=${port}`,
      "--bind-address=127.0.0.1",
      `--socket=${join(dir, "sock")}`,
      "--user=mysql",
      "--skip-log-bin",
      "--innodb-buffer-pool-size=32M"
    ], { stdio: "ignore" })
    const until = performance.now() + 30_000
    while (!answers()) {
      if (performance.now() > until) throw new Error("the private mariadbd did not answer within 30 s")
      await new Promise((resolve) => setTimeout(resolve, 100))
    }
  }
  const kill = () => {
    if (server !== undefined && server.exitCode === null && server.signalCode === null) server.kill("SIGKILL")
  }
  return {
    label: "MariaDB",
    lockDelay: 0,
    url: () => `mysql://root@127.0.0.1:${port}/test`,
    layer: (url) => MysqlBackend.layer({ url, tablePrefix: "simba_t_rs_" }),
    setUp: async () => {
      port = await freePort()
      dir = privateDir("mariadb", "mysql")
      execFileSync("mariadb-install-db", [
        "--no-defaults",
        `--datadir=${join(dir, "data")}`,
        "--user=mysql",
        "--auth-root-authentication-method=normal",
        "--skip-test-db"
      ], { stdio: "pipe", timeout: 60_000 })
      await start()
    },
    start,
    crash: kill,
    tearDown: () => {
      kill()
      if (dir !== "") rmSync(dir, { recursive: true, force: true })
    }
  }
}

const pgBin = "/usr/lib/postgresql/15/bin"
const leaseDuration = 2000
/** At least the lease duration, as docs/sql.md asks. */
const pgLockDelay = 3000

interface Event {
  readonly at: number
  readonly client: string
  readonly kind: "elected" | "revoked"
  readonly token: bigint
}

// Starting private servers needs root (`runuser`, `chown`, `mariadbd --user`), as on this project's
// machines and CI (Debian, root); elsewhere these cases cannot run.
const isRoot = process.getuid?.() === 0

for (const server of [postgres(), mariadb()]) {
  describe.skipIf(!isRoot)(`${server.label} crash and restart`, () => {
    beforeAll(() => server.setUp(), 60_000)
    afterAll(() => server.tearDown())

    it.live("terms end by their deadline while the database is down; after the restart a leader is elected with a larger token", () =>
      Effect.gen(function*() {
        const url = server.url()
        const events = yield* Ref.make<ReadonlyArray<Event>>([])
        const record = (client: string, kind: Event["kind"], token: bigint) =>
          Ref.update(events, (list) => [...list, { at: performance.now(), client, kind, token }])
        const contender = (label: string) =>
          Effect.gen(function*() {
            const backend = yield* Layer.build(server.layer(url))
            const client = yield* Simba.make({ leaseDuration }).pipe(
              Effect.provideService(LeaseBackend, backend.unsafeMap.get(LeaseBackend.key) as LeaseBackend["Type"])
            )
            return yield* Effect.forkScoped(client.runWhileLeader("restart", (term) =>
              Effect.zipRight(
                record(label, "elected", term.token),
                Effect.never
              ).pipe(Effect.ensuring(record(label, "revoked", term.token)))))
          })
        const scope = yield* Scope.make()
        const fibers = yield* Effect.all([contender("a"), contender("b")]).pipe(Scope.extend(scope))
        const waitFor = (predicate: (list: ReadonlyArray<Event>) => boolean, what: string, ms: number) =>
          Effect.gen(function*() {
            const until = performance.now() + ms
            for (;;) {
              const list = yield* Ref.get(events)
              if (predicate(list)) return list
              if (performance.now() > until) return yield* Effect.dieMessage(`timed out waiting for ${what}: ${JSON.stringify(list, (_, v) => typeof v === "bigint" ? String(v) : v)}`)
              yield* Effect.sleep("10 millis")
            }
          })
        const first = (yield* waitFor((l) => l.some((e) => e.kind === "elected"), "a leader", 15_000))
          .find((e) => e.kind === "elected")!
        yield* Effect.sleep("700 millis")

        // Crash (no shutdown checkpoint), stay down longer than the lease, then start again.
        const crashedAt = performance.now()
        yield* Effect.sync(server.crash)
        const revoked = (yield* waitFor((l) => l.some((e) => e.kind === "revoked"), "the leader's revocation", 10_000))
          .find((e) => e.kind === "revoked")!
        expect(revoked.token).toBe(first.token)
        // Ended by its local deadline: at most leaseDuration after the crash (its last renewal came before;
        // 1 s of slack for a stalled test process), and before the database is back.
        expect(revoked.at - crashedAt).toBeLessThanOrEqual(leaseDuration + 1000)
        yield* Effect.sleep(`${Math.max(0, leaseDuration + 1000 - (performance.now() - crashedAt))} millis`)
        expect((yield* Ref.get(events)).filter((e) => e.kind === "elected")).toHaveLength(1)
        yield* Effect.promise(server.start)
        const restartedAt = performance.now()

        const after = (yield* waitFor((l) => l.filter((e) => e.kind === "elected").length >= 2, "a leader after the restart", 20_000))
          .filter((e) => e.kind === "elected")[1]!
        expect(after.token).toBeGreaterThan(first.token)
        expect(after.at).toBeGreaterThan(revoked.at)
        // The server took connections before pg_ctl saw it up (it polls): 500 ms of slack for that.
        expect(after.at - restartedAt).toBeGreaterThanOrEqual(server.lockDelay - 500)
        yield* Effect.forEach(fibers, Fiber.interrupt, { discard: true })
        yield* Scope.close(scope, Exit.void)
      }), 90_000)
  })
}
