/**
 * Private database servers for tests that crash them: PostgreSQL (initdb in a temporary directory,
 * run as the `postgres` user, stopped with its own `pg_ctl`) and MariaDB (mariadb-install-db,
 * `mariadbd` run as `mysql`, killed by its pid), each on a free loopback port, never the suite's
 * shared servers. Starting them needs root (`runuser`, `chown`, `mariadbd --user`), as on this
 * project's machines and CI (Debian, root).
 */
import { type ChildProcess, execFileSync, spawn } from "node:child_process"
import { chmodSync, mkdtempSync, openSync, rmSync } from "node:fs"
import { freePort } from "./processes.js"
import { tmpdir } from "node:os"
import { join } from "node:path"

export interface PrivateSqlServer {
  readonly label: "PostgreSQL" | "MariaDB"
  /** Where a client connects (`postgres://...` or `mysql://...`), once set up. */
  readonly url: () => string
  readonly port: () => number
  /** Creates the data directory and starts the server. */
  readonly setUp: () => Promise<void>
  /** Starts (again) on the same data. */
  readonly start: () => Promise<void>
  /** Crashes it: no shutdown, no checkpoint. */
  readonly crash: () => void
  /** Stops it if running and removes its data. */
  readonly tearDown: () => void
}

/** Whether this process may start private servers. */
export const canStartPrivateServers = process.getuid?.() === 0

const privateDir = (label: string, owner: string) => {
  const dir = mkdtempSync(join(tmpdir(), `simba-${label}-private-`))
  chmodSync(dir, 0o777)
  execFileSync("chown", [owner, dir])
  return dir
}

const pgBin = "/usr/lib/postgresql/15/bin"

export const privatePostgres = (): PrivateSqlServer => {
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
    url: () => `postgres://postgres@127.0.0.1:${port}/postgres`,
    port: () => port,
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

export const privateMariadb = (): PrivateSqlServer => {
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
    ], { stdio: ["ignore", "ignore", openSync(join(dir, "log"), "a")] })
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
    url: () => `mysql://root@127.0.0.1:${port}/test`,
    port: () => port,
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
      if (dir !== "" && process.env["SIMBA_KEEP_PRIVATE_SERVERS"] !== "1") rmSync(dir, { recursive: true, force: true })
    }
  }
}
