/**
 * Options of the ZooKeeper backend: where the ensemble is, the root path of Simba's nodes, and how
 * long to wait for a connection. Checked before any connection; an invalid one fails with
 * `SimbaConfigError { field: "zookeeper.<option>", value, rule }` (and `variable`, when it was read
 * from the environment).
 */
import type * as Config from "effect/Config"
import * as Effect from "effect/Effect"
import * as Either from "effect/Either"
import type { SimbaConfigError } from "../../Errors.js"
import * as Options from "../../internal/options.js"
import { brokenRule } from "../../LeaseName.js"

/** How to reach ZooKeeper. */
export interface ZookeeperOptions {
  /** The ensemble, `host:port[,host:port...]` (ZooKeeper's connect string, without a chroot). Default `127.0.0.1:2181`. */
  readonly connect?: string | undefined
  /** Absolute path under which Simba keeps its nodes (`{root}/leases`, `{root}/groups`, `{root}/pools`). Default `/simba`. */
  readonly root?: string | undefined
  /** Time allowed to connect a new session (and the backend's own watcher session at start). Default 10 seconds. */
  readonly connectTimeout?: Options.DurationOption | undefined
}

/** The options, checked and filled in with their defaults. */
export interface Settings {
  readonly connect: string
  readonly root: string
  readonly leasesPath: string
  readonly groupsPath: string
  readonly poolsPath: string
  readonly connectTimeout: number
}

/**
 * Options read from the environment: `SIMBA_ZK_CONNECT` (default `127.0.0.1:2181`) and
 * `SIMBA_ZK_ROOT` (default `/simba`). An invalid one fails the backend's start with a
 * `SimbaConfigError` naming the variable, its value and the rule.
 */
export const config: Config.Config<ZookeeperOptions> = Options.fromEnv({
  connect: Options.text("SIMBA_ZK_CONNECT"),
  root: Options.text("SIMBA_ZK_ROOT")
})

/** Checks `options` and fills in the defaults; fails with `SimbaConfigError` naming the first invalid option. */
export const resolve = (options: ZookeeperOptions): Effect.Effect<Settings, SimbaConfigError> =>
  Effect.gen(function*() {
    const check = yield* Options.check("zookeeper", options)
    const connect = options.connect ?? "127.0.0.1:2181"
    const servers = Options.parseHostPorts(connect)
    if (Either.isLeft(servers)) return yield* check.invalid("connect", connect, servers.left)
    const root = options.root ?? "/simba"
    if (!root.startsWith("/") || root === "/" || root.endsWith("/")) {
      return yield* check.invalid("root", root, "must be an absolute path of at least one segment, without a trailing slash")
    }
    for (const segment of root.slice(1).split("/")) {
      // Segments follow the lease-name rules, so every path Simba builds is a valid ZooKeeper path.
      const rule = brokenRule(segment)
      if (rule !== undefined) return yield* check.invalid("root", root, `segment ${JSON.stringify(segment)}: ${rule}`)
    }
    const connectTimeout = Math.ceil(yield* check.duration("connectTimeout", options.connectTimeout, 10_000))
    return {
      connect: servers.right.map(({ host, port }) => `${host}:${port}`).join(","),
      root,
      leasesPath: `${root}/leases`,
      groupsPath: `${root}/groups`,
      poolsPath: `${root}/pools`,
      connectTimeout
    }
  })
