/**
 * The package as users get it: build and `npm pack` this repository, install the tarball into a fresh
 * project (in the OS temp directory) with the required peers only, no driver, and run there
 *   - a plain `node` ESM program on `SimbaMemoryLive` (a `withLock` and an election);
 *   - a TypeScript program compiled by `tsc --strict` with NodeNext resolution and `skipLibCheck: false`
 *     (the root and every driver-free subpath), run with `node`;
 *   - the same ESM program under a recorder of every module it resolves: no driver may appear;
 *   - each backend's `Simba*Live` built without its driver: a typed failure naming the package and the
 *     install line (Redis, PostgreSQL, MySQL, ZooKeeper);
 *   - the fencing entry points (`simba/fencing`, `/http`, `/redis`) loaded without any driver;
 *   - the texts a new user reads: package metadata, the README's user part, install lines with versions;
 *   - last (it installs the drivers): the backends' subpaths compiled with `skipLibCheck: false`.
 * The programs live in `test/packaging/app/`. npm runs with `--prefer-offline` (its cache is warm
 * from `npm ci`); every child process has a timeout.
 */
import { execFile } from "node:child_process"
import { copyFileSync, existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from "node:fs"
import { tmpdir } from "node:os"
import { dirname, join } from "node:path"
import { fileURLToPath } from "node:url"
import { afterAll, beforeAll, describe, expect, it } from "vitest"

const root = fileURLToPath(new URL("../..", import.meta.url))
const fixtures = fileURLToPath(new URL("./app", import.meta.url))
const tsc = join(root, "node_modules", "typescript", "bin", "tsc")
const manifest = JSON.parse(readFileSync(join(root, "package.json"), "utf8")) as {
  readonly peerDependencies: Record<string, string>
  readonly peerDependenciesMeta: Record<string, { readonly optional?: boolean }>
  readonly devDependencies: Record<string, string>
}
/** The required peers, at the ranges the package asks for (a bare `@effect/platform-node` is Effect 4's). */
const requiredPeers = Object.entries(manifest.peerDependencies)
  .filter(([name]) => manifest.peerDependenciesMeta[name]?.optional !== true)
  .map(([name, range]) => `${name}@${range}`)
const devDependencies = manifest.devDependencies
/** Driver packages: none may be installed by the peers above, nor loaded by `import "simba"`. */
const drivers = ["ioredis", "zookeeper", "pg", "mysql2", "@effect/sql-pg", "@effect/sql-mysql2"]

interface Run {
  readonly stdout: string
  readonly stderr: string
}

/**
 * Runs a program (no shell), failing with its output when it exits non-zero or outlives `timeout`.
 * The parent npm's `npm_*` variables are dropped, so the npm run here takes the temp project as its
 * own and not this repository (`npm_config_local_prefix` and friends under `npm test`).
 */
const run = (file: string, args: ReadonlyArray<string>, options: {
  readonly cwd: string
  readonly timeout: number
  readonly env?: Record<string, string>
}): Promise<Run> =>
  new Promise((resolve, reject) => {
    const env = Object.fromEntries(Object.entries(process.env).filter(([key]) => !/^npm_/i.test(key)))
    execFile(file, args, {
      cwd: options.cwd,
      timeout: options.timeout,
      maxBuffer: 16 * 1024 * 1024,
      env: { ...env, ...options.env }
    }, (error, stdout, stderr) => {
      if (error) {
        reject(Object.assign(
          new Error(`${file} ${args.join(" ")} failed (${error.message})\n--- stdout\n${stdout}\n--- stderr\n${stderr}`),
          { code: error.code }
        ))
      } else {
        resolve({ stdout, stderr })
      }
    })
  })

const lastLine = (output: string): string => output.trim().split("\n").at(-1) ?? ""

/** The package a specifier or a CommonJS file path belongs to, if it is one of the drivers. */
const driverOf = (line: string): string | undefined => {
  const [kind, target = ""] = line.split(" ", 2)
  return drivers.find((driver) =>
    kind === "import"
      ? target === driver || target.startsWith(`${driver}/`) || target.includes(`/node_modules/${driver}/`)
      : target.includes(`/node_modules/${driver}/`)
  )
}

let temp = ""
let app = ""
let packed: ReadonlyArray<string> = []

describe("the packed library in a fresh project", () => {
  beforeAll(async () => {
    temp = mkdtempSync(join(tmpdir(), "simba-packaging-"))
    app = join(temp, "app")
    // `npm pack` runs `prepack`, which builds dist/ from src/.
    const pack = await run("npm", ["pack", "--json", "--pack-destination", temp], { cwd: root, timeout: 90_000 })
    const [info] = JSON.parse(pack.stdout.slice(pack.stdout.indexOf("["))) as ReadonlyArray<{
      readonly filename: string
      readonly files: ReadonlyArray<{ readonly path: string }>
    }>
    packed = info!.files.map((file) => file.path)
    mkdirSync(app)
    writeFileSync(join(app, "package.json"), JSON.stringify({ name: "simba-user", private: true, type: "module" }))
    for (const file of readdirSync(fixtures)) copyFileSync(join(fixtures, file), join(app, file))
    await run("npm", [
      "install",
      "--prefer-offline",
      "--no-audit",
      "--no-fund",
      join(temp, info!.filename),
      ...requiredPeers,
      // a Node app's own types (the platform's declarations name fetch's Request and Response)
      `@types/node@${devDependencies["@types/node"]}`
    ], { cwd: app, timeout: 85_000 })
  }, 180_000)

  afterAll(() => {
    if (temp !== "") rmSync(temp, { recursive: true, force: true })
  })

  it("ships dist/, the sources its maps point at, README and docs, and installs with one effect and no driver", () => {
    expect(packed).toContain("dist/index.js")
    expect(packed).toContain("dist/index.d.ts")
    expect(packed).toContain("README.md")
    expect(packed.filter((path) =>
      !/^(dist|src|docs)\//.test(path) && path !== "README.md" && path !== "LICENSE" && path !== "package.json"
    )).toEqual([])
    // go-to-definition: every declaration map points at a source file the package ships
    const maps = packed.filter((path) => path.endsWith(".d.ts.map"))
    expect(maps.length).toBeGreaterThan(10)
    const installed = join(app, "node_modules", "simba")
    const unresolved = maps.flatMap((path) => {
      const map = JSON.parse(readFileSync(join(installed, path), "utf8")) as { readonly sources: ReadonlyArray<string> }
      return map.sources
        .map((source) => join(dirname(join(installed, path)), source))
        .filter((source) => !existsSync(source))
    })
    expect(unresolved).toEqual([])
    // the app's effect is the one simba uses: no nested copy under simba
    expect(existsSync(join(app, "node_modules", "simba", "node_modules"))).toBe(false)
    const effect = JSON.parse(readFileSync(join(app, "node_modules", "effect", "package.json"), "utf8")) as {
      readonly version: string
    }
    expect(effect.version).toMatch(/^3\./)
    expect(drivers.filter((driver) => existsSync(join(app, "node_modules", driver)))).toEqual([])
  })

  it("runs a plain node ESM program on SimbaMemoryLive: a withLock and an election", async () => {
    const { stdout } = await run(process.execPath, ["memory.mjs"], { cwd: app, timeout: 30_000 })
    const result = JSON.parse(lastLine(stdout)) as {
      readonly locked: { readonly lease: string; readonly token: string }
      readonly elected: { readonly lease: string; readonly token: string; readonly status: string }
    }
    expect(result.locked.lease).toBe("orders")
    expect(BigInt(result.locked.token)).toBeGreaterThan(0n)
    expect(result.elected.lease).toBe("reporter")
    expect(BigInt(result.elected.token)).toBeGreaterThan(0n)
    expect(result.elected.status).toBe("LEADER")
  }, 40_000)

  it("compiles a TypeScript program with tsc --strict, NodeNext, and runs it with node", async () => {
    // skipLibCheck: false checks every declaration file the program reaches (effect's too): minutes on a busy machine
    await run(process.execPath, [tsc, "-p", "tsconfig.json"], { cwd: app, timeout: 240_000 })
    const { stdout } = await run(process.execPath, [join("out", "typed.js")], { cwd: app, timeout: 30_000 })
    const [, lockToken = "", leaderToken = ""] = /typed lock=(\d+) leader=(\d+)/.exec(lastLine(stdout)) ?? []
    expect(BigInt(lockToken)).toBeGreaterThan(0n)
    expect(BigInt(leaderToken)).toBeGreaterThan(0n)
  }, 300_000)

  it("loads no driver for import \"simba\" and SimbaMemoryLive", async () => {
    const recorded = async (program: string) => {
      const log = join(temp, `${program}.loads.log`)
      writeFileSync(log, "")
      await run(process.execPath, ["--import", "./record-loads.mjs", program], {
        cwd: app,
        timeout: 30_000,
        env: { SIMBA_LOAD_LOG: log }
      })
      return readFileSync(log, "utf8").split("\n").filter((line) => line !== "")
    }
    const loads = await recorded("memory.mjs")
    // the recorder sees the program's own imports, and the library's
    expect(loads).toContain("import simba")
    expect(loads).toContain("import effect")
    expect(loads.filter((line) => driverOf(line) !== undefined)).toEqual([])
    // nor the command line's packages, from the root or a backend's subpath: only `simba`'s bin loads them
    const cliModule = (line: string) => /@effect\/(cli|printer|platform-node)\b|\/dist\/cli\//.test(line)
    expect(loads.filter(cliModule)).toEqual([])
    const subpaths = await recorded("drivers-missing.mjs")
    expect(subpaths).toContain("import simba/redis")
    expect(subpaths.filter(cliModule)).toEqual([])
    // and it would see a driver: the control program tries to import one
    const control = await recorded("imports-a-driver.mjs")
    expect(control.flatMap((line) => driverOf(line) ?? [])).toContain("ioredis")
  }, 70_000)

  it("fails to build each backend's layer without its driver, naming the package and the install line", async () => {
    const { stdout } = await run(process.execPath, ["drivers-missing.mjs"], { cwd: app, timeout: 100_000 })
    const results = stdout.trim().split("\n").filter((line) => line.startsWith("{")).map((line) =>
      JSON.parse(line) as {
        readonly backend: string
        readonly failed: boolean
        readonly tag?: string
        readonly message?: string
        readonly pretty?: string
      }
    )
    const expected: Record<string, RegExp> = {
      redis: /needs the package ioredis\b.*npm install ioredis@\^5/,
      postgres: /npm install @effect\/sql@\^0\.52 @effect\/sql-pg@\^0\.53/,
      mysql: /npm install @effect\/sql@\^0\.52 @effect\/sql-mysql2@\^0\.53/,
      zookeeper: /needs the package zookeeper\b.*npm install zookeeper@~7\.3/
    }
    expect(results.map((result) => result.backend)).toEqual(Object.keys(expected))
    for (const result of results) {
      expect(result.failed, result.backend).toBe(true)
      expect(result.tag, result.pretty).toBe("BackendError")
      expect(result.message, result.backend).toMatch(expected[result.backend]!)
    }
  }, 110_000)

  it("loads the fencing entry points without any driver, and a stale token is refused", async () => {
    expect(packed).toEqual(expect.arrayContaining([
      "dist/fencing/Fencing.js",
      "dist/fencing/FencedHttp.js",
      "dist/fencing/FencedRedis.js",
      "dist/fencing/FencedSql.js"
    ]))
    const { stdout } = await run(process.execPath, ["fencing.mjs"], { cwd: app, timeout: 30_000 })
    const result = JSON.parse(lastLine(stdout)) as {
      readonly refused: string
      readonly header: string
      readonly redisScript: string
    }
    expect(result.refused).toBe("FencedWriteRejectedError")
    expect(result.header).toContain("7")
    expect(result.redisScript).toBe("string")
  }, 40_000)

  it("describes itself to npm: repository, homepage, bugs, keywords, ESM only", () => {
    const installed = JSON.parse(readFileSync(join(app, "node_modules", "simba", "package.json"), "utf8")) as Record<
      string,
      unknown
    >
    expect(installed.type).toBe("module")
    expect(installed.repository).toMatchObject({ type: "git" })
    expect(typeof installed.homepage).toBe("string")
    expect(installed.bugs).toMatchObject({ url: expect.any(String) })
    expect(installed.keywords).toEqual(expect.arrayContaining(["effect", "leader-election", "distributed-lock"]))
  })

  it("gives a user who installed the package a README that starts their part early and says ESM only", () => {
    const readme = readFileSync(join(app, "node_modules", "simba", "README.md"), "utf8")
    const lines = readme.split("\n")
    // the checkout's two commands come first; the user's part is marked within the first screen
    expect(lines.slice(0, 40).some((line) => /^#+ .*(your app|install)/i.test(line))).toBe(true)
    expect(readme).toMatch(/ESM[- ]only/i)
    // the package does not ship examples/: no link may send a user there as if it did
    expect(readme).not.toMatch(/\]\((\.\/)?examples\//)
  })

  it("names versions that work in every install line of README.md, docs/ and the library's messages", () => {
    const texts = [join(root, "README.md"), ...readdirSync(join(root, "docs")).map((file) => join(root, "docs", file))]
      .filter((file) => file.endsWith(".md"))
      .map((file) => ({ file, text: readFileSync(file, "utf8") }))
    const messages = readdirSync(join(root, "dist"), { recursive: true, encoding: "utf8" })
      .filter((file) => file.endsWith(".js"))
      .map((file) => ({ file: `dist/${file}`, text: readFileSync(join(root, "dist", file), "utf8") }))
    const unversioned = [...texts, ...messages].flatMap(({ file, text }) =>
      [...text.matchAll(/npm (?:install|i|add)((?: +[^\s`"'#;&|)]+)+)/g)].flatMap((match) =>
        match[1]!.trim().split(/ +/)
          .filter((argument) => !argument.startsWith("-") && argument !== "simba" && !argument.startsWith("."))
          // a package without a version: no "@" after its first character (scoped names start with one)
          .filter((argument) => argument.indexOf("@", 1) === -1)
          .map((argument) => `${file}: ${match[0]} (${argument})`)
      )
    )
    expect(texts.length).toBeGreaterThan(1)
    expect(unversioned).toEqual([])
  })

  it("runs npx simba --help, and exits 78 naming the install line when the chosen backend's driver is missing", async () => {
    const top = await run("npx", ["--no-install", "simba", "--help"], { cwd: app, timeout: 60_000 })
    expect(top.stdout).toMatch(/lock .*elect .*status .*watch/s)
    const help = await run("npx", ["--no-install", "simba", "lock", "--help"], { cwd: app, timeout: 60_000 })
    expect(help.stdout).toMatch(/SIMBA_TOKEN/)
    expect(help.stdout).toMatch(/\b75\b.*\b76\b/s)
    const failed = await run("npx", ["--no-install", "simba", "lock", "x", "--", "true"], {
      cwd: app,
      timeout: 60_000,
      env: { SIMBA_BACKEND: "redis" }
    }).then(() => undefined, (error: unknown) => error as { readonly code?: unknown; readonly message: string })
    // Redis chosen, ioredis not installed: a setup to fix (78), naming the package and the install line.
    expect(failed?.code).toBe(78)
    expect(failed?.message).toMatch(/npm install ioredis/)
  }, 130_000)

  it("compiles the backends' subpaths with skipLibCheck: false once their drivers are installed", async () => {
    await run("npm", [
      "install",
      "--prefer-offline",
      "--no-audit",
      "--no-fund",
      "--ignore-scripts",
      ...["ioredis", "@effect/sql", "@effect/sql-pg", "@effect/sql-mysql2", "zookeeper"].map(
        (name) => `${name}@${manifest.peerDependencies[name]}`
      )
    ], { cwd: app, timeout: 120_000 })
    await run(process.execPath, [tsc, "-p", "tsconfig.backends.json"], { cwd: app, timeout: 240_000 })
  }, 400_000)

  it("runs npx simba lock on Redis once ioredis is installed: the command gets the lease and its token", async () => {
    // Installed by the case above; on its own (`-t`), this case installs it.
    if (!existsSync(join(app, "node_modules", "ioredis"))) {
      await run("npm", ["install", "--prefer-offline", "--no-audit", "--no-fund", `ioredis@${manifest.peerDependencies.ioredis}`], {
        cwd: app,
        timeout: 120_000
      })
    }
    const { stdout } = await run("npx", [
      "--no-install",
      "simba",
      "lock",
      `packaging.${process.pid}`,
      "--",
      process.execPath,
      "-e",
      "console.log(`held ${process.env.SIMBA_LEASE} ${process.env.SIMBA_TOKEN}`)"
    ], { cwd: app, timeout: 60_000, env: { SIMBA_BACKEND: "redis", SIMBA_REDIS_KEY_PREFIX: `packaging-${process.pid}`, SIMBA_REDIS_LOCK_DELAY: "0" } })
    const [, lease = "", token = ""] = /held (\S+) (\d+)/.exec(stdout) ?? []
    expect(lease).toBe(`packaging.${process.pid}`)
    expect(BigInt(token)).toBeGreaterThan(0n)
  }, 200_000)
})
