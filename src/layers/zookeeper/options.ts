/**
 * Options of the ZooKeeper backend: where the ensemble is, the root path of Simba's nodes, and how
 * long to wait for a connection. Checked before any connection; an invalid one fails with
 * `SimbaConfigError { field: "zookeeper.<option>", rule }`.
 */
import * as Config from "effect/Config"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Either from "effect/Either"
import * as Option from "effect/Option"
import { SimbaConfigError } from "../../Errors.js"
import { parseDuration } from "../../SimbaConfig.js"
import { brokenRule } from "../../LeaseName.js"

/** How to reach ZooKeeper. */
export interface ZookeeperOptions {
  /** The ensemble, `host:port[,host:port...]` (ZooKeeper's connect string, without a chroot). Default `127.0.0.1:2181`. */
  readonly connect?: string | undefined
  /** Absolute path under which Simba keeps its nodes (`{root}/leases`, `{root}/groups`). Default `/simba`. */
  readonly root?: string | undefined
  /** Time allowed to connect a new session (and the backend's own watcher session at start). Default 10 seconds. */
  readonly connectTimeout?: Duration.DurationInput | undefined
}

/** The options, checked and filled in with their defaults. */
export interface Settings {
  readonly connect: string
  readonly root: string
  readonly leasesPath: string
  readonly groupsPath: string
  readonly connectTimeout: number
}

/** Options read from the environment: `SIMBA_ZK_CONNECT` (default `127.0.0.1:2181`) and `SIMBA_ZK_ROOT` (default `/simba`). */
export const config: Config.Config<ZookeeperOptions> = Config.all({
  connect: Config.string("SIMBA_ZK_CONNECT").pipe(Config.withDefault("127.0.0.1:2181")),
  root: Config.string("SIMBA_ZK_ROOT").pipe(Config.withDefault("/simba"))
})

const invalid = (option: string, rule: string) => Effect.fail(new SimbaConfigError({ field: `zookeeper.${option}`, rule }))

// host:port, host a name, IPv4 or [IPv6].
const hostPortPattern = /^(\[[0-9A-Fa-f:.]+\]|[A-Za-z0-9.-]+):(\d{1,5})$/

/** Checks `options` and fills in the defaults; fails with `SimbaConfigError` naming the first invalid option. */
export const resolve = (options: ZookeeperOptions): Effect.Effect<Settings, SimbaConfigError> =>
  Effect.gen(function*() {
    const connect = (options.connect ?? "127.0.0.1:2181").trim()
    const servers = connect.split(",").map((part) => part.trim())
    for (const server of servers) {
      const match = hostPortPattern.exec(server)
      const port = match === null ? NaN : Number(match[2])
      if (match === null || !Number.isInteger(port) || port < 1 || port > 65535) {
        return yield* invalid("connect", `must be host:port[,host:port...] with ports in 1..65535 (got ${JSON.stringify(server)})`)
      }
    }
    const root = options.root ?? "/simba"
    if (!root.startsWith("/") || root === "/" || root.endsWith("/")) {
      return yield* invalid("root", "must be an absolute path of at least one segment, without a trailing slash")
    }
    for (const segment of root.slice(1).split("/")) {
      // Segments follow the lease-name rules, so every path Simba builds is a valid ZooKeeper path.
      const rule = brokenRule(segment)
      if (rule !== undefined) return yield* invalid("root", `segment ${JSON.stringify(segment)}: ${rule}`)
    }
    let connectTimeout = 10_000
    if (options.connectTimeout !== undefined) {
      const input = options.connectTimeout
      // Text as SimbaConfig reads it (`8s`, `500ms`, `15 seconds`), so every duration option takes the same forms.
      if (typeof input === "string" && Either.isLeft(parseDuration(input))) {
        return yield* invalid("connectTimeout", Either.getLeft(parseDuration(input)).pipe(Option.getOrElse(() => "invalid")))
      }
      const decoded = typeof input === "string"
        ? Option.map(Either.getRight(parseDuration(input)), Duration.millis)
        : Duration.decodeUnknown(input)
      const ms = Option.isSome(decoded) ? Duration.toMillis(decoded.value) : NaN
      if (!Number.isFinite(ms) || ms < 1) return yield* invalid("connectTimeout", "must be a finite duration of at least 1 ms")
      connectTimeout = Math.ceil(ms)
    }
    return {
      connect: servers.join(","),
      root,
      leasesPath: `${root}/leases`,
      groupsPath: `${root}/groups`,
      connectTimeout
    }
  })
