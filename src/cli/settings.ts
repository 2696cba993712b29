/**
 * Where the `simba` command's backend and client settings come from: the environment variables of
 * the `SimbaXxxLive` layers (`SIMBA_BACKEND` picks the backend), or flags that set the same
 * variables (a flag wins over the variable). One reading path: the flags become a `ConfigProvider`
 * in front of the environment, and each backend reads its own `config` through it.
 */
import * as Options from "@effect/cli/Options"
import * as Config from "effect/Config"
import * as ConfigProvider from "effect/ConfigProvider"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Either from "effect/Either"
import * as Layer from "effect/Layer"
import * as Option from "effect/Option"
import type * as Scope from "effect/Scope"
import { redactUrl } from "../internal/options.js"
import * as MemoryBackend from "../layers/Memory.js"
import * as RedisBackend from "../layers/redis/RedisBackend.js"
import * as MysqlBackend from "../layers/sql/MysqlBackend.js"
import * as PgBackend from "../layers/sql/PgBackend.js"
import * as ZookeeperBackend from "../layers/zookeeper/ZookeeperBackend.js"
import { BackendError, LeaseBackend, type LeaseBackendService } from "../LeaseBackend.js"
import * as Simba from "../Simba.js"
import * as SimbaConfig from "../SimbaConfig.js"
import { UnreachableError, UsageError } from "./status.js"

export const backends = ["redis", "postgres", "mysql", "zookeeper", "memory"] as const
export type BackendName = typeof backends[number]

/** The variable `--url` sets, per backend. */
const urlVariables: Record<BackendName, string | undefined> = {
  redis: "SIMBA_REDIS_URL",
  postgres: "SIMBA_PG_URL",
  mysql: "SIMBA_MYSQL_URL",
  zookeeper: "SIMBA_ZK_CONNECT",
  memory: undefined
}

/** The flags every command takes. */
export const flags = {
  backend: Options.text("backend").pipe(
    Options.withDescription(`The store: ${backends.join(", ")} (sets SIMBA_BACKEND).`),
    Options.optional
  ),
  url: Options.text("url").pipe(
    Options.withDescription(
      "Where the store is (sets SIMBA_REDIS_URL, SIMBA_PG_URL, SIMBA_MYSQL_URL or SIMBA_ZK_CONNECT, for the chosen backend)."
    ),
    Options.optional
  ),
  leaseDuration: Options.text("lease-duration").pipe(
    Options.withDescription("How long the store keeps this process's session after its last renewal, e.g. 15s (sets SIMBA_LEASE_DURATION)."),
    Options.optional
  ),
  renewInterval: Options.text("renew-interval").pipe(
    Options.withDescription("How often the session is renewed, e.g. 5s (sets SIMBA_RENEW_INTERVAL)."),
    Options.optional
  ),
  margin: Options.text("margin").pipe(
    Options.withDescription("Safety margin taken off the term's deadline, e.g. 2s (sets SIMBA_MARGIN)."),
    Options.optional
  )
}

export interface Flags {
  readonly backend: Option.Option<string>
  readonly url: Option.Option<string>
  readonly leaseDuration: Option.Option<string>
  readonly renewInterval: Option.Option<string>
  readonly margin: Option.Option<string>
}

/** The flags as the variables they set, in front of the environment. */
export const providerOf = (given: Flags, env: Readonly<Record<string, string | undefined>>): ConfigProvider.ConfigProvider => {
  const set = new Map<string, string>()
  const backend = Option.getOrElse(given.backend, () => env.SIMBA_BACKEND ?? "")
  if (Option.isSome(given.backend)) set.set("SIMBA_BACKEND", given.backend.value)
  if (Option.isSome(given.leaseDuration)) set.set("SIMBA_LEASE_DURATION", given.leaseDuration.value)
  if (Option.isSome(given.renewInterval)) set.set("SIMBA_RENEW_INTERVAL", given.renewInterval.value)
  if (Option.isSome(given.margin)) set.set("SIMBA_MARGIN", given.margin.value)
  if (Option.isSome(given.url)) {
    const variable = (urlVariables as Record<string, string | undefined>)[backend]
    if (variable !== undefined) set.set(variable, given.url.value)
  }
  return ConfigProvider.fromMap(set).pipe(ConfigProvider.orElse(() => ConfigProvider.fromEnv()))
}

/** `--url` given for a backend that has none, or `SIMBA_BACKEND` missing or unknown. */
export const backendName = (given: Flags): Effect.Effect<BackendName, UsageError> =>
  Effect.gen(function*() {
    const name = yield* Effect.orElseSucceed(Config.option(Config.string("SIMBA_BACKEND")), () => Option.none<string>())
    if (Option.isNone(name) || name.value === "") {
      return yield* new UsageError({
        text: `no backend chosen: set SIMBA_BACKEND or pass --backend, one of ${backends.join(", ")}`
      })
    }
    const chosen = backends.find((b) => b === name.value)
    if (chosen === undefined) {
      const source = Option.isSome(given.backend) ? "--backend" : "SIMBA_BACKEND"
      return yield* new UsageError({
        text: `${source} is ${JSON.stringify(redactUrl(name.value))}: must be one of ${backends.join(", ")}`
      })
    }
    if (chosen === "memory" && Option.isSome(given.url)) {
      return yield* new UsageError({ text: `--url is given, but the memory backend lives in this process and has no address` })
    }
    return chosen
  })

/** The chosen backend's layer, configured from its variables. */
const layerOf = (name: BackendName): Layer.Layer<LeaseBackend, unknown> => {
  switch (name) {
    case "redis":
      return RedisBackend.layerConfig(RedisBackend.config)
    case "postgres":
      return PgBackend.layerConfig(PgBackend.config)
    case "mysql":
      return MysqlBackend.layerConfig(MysqlBackend.config)
    case "zookeeper":
      return ZookeeperBackend.layerConfig(ZookeeperBackend.config)
    case "memory":
      return MemoryBackend.layer()
  }
}

/** A duration argument of a command (`--timeout`, `--grace`): text with a unit, or the flag's message. */
export const durationFlag = (flag: string, text: string): Effect.Effect<Duration.Duration, UsageError> =>
  Either.match(SimbaConfig.parseDuration(text), {
    onLeft: (rule) => Effect.fail(new UsageError({ text: `--${flag} ${JSON.stringify(text)}: ${rule}` })),
    onRight: (millis) => Effect.succeed(Duration.millis(millis))
  })

/** Checks a timing flag before anything else, so its message names the flag, not the variable it sets. */
const checkDuration = (flag: string, value: Option.Option<string>): Effect.Effect<void, UsageError> =>
  Option.match(value, { onNone: () => Effect.void, onSome: (text) => Effect.asVoid(durationFlag(flag, text)) })

/** What a command works with: the backend (checked reachable), and the validated client timing. */
export interface Connected {
  readonly backend: LeaseBackendService
  readonly config: SimbaConfig.SimbaConfig
}

/**
 * Reads the settings (flags over environment), builds the backend in the scope and makes one round
 * trip (a session opened and closed) within the lease duration: a store that cannot be reached is an
 * `UnreachableError` at once, not a lock that waits forever.
 */
export const connect = (given: Flags): Effect.Effect<Connected, unknown, Scope.Scope> =>
  Effect.gen(function*() {
    yield* checkDuration("lease-duration", given.leaseDuration)
    yield* checkDuration("renew-interval", given.renewInterval)
    yield* checkDuration("margin", given.margin)
    const name = yield* backendName(given)
    const read = yield* SimbaConfig.fromEnv
    // The client's INFO lines (session opened, elected) would bury the command's own output; its
    // warnings and errors still show. SIMBA_LOG_LEVEL chooses otherwise.
    const level = yield* Effect.orElseSucceed(Config.option(Config.string("SIMBA_LOG_LEVEL")), () => Option.none<string>())
    const config = Option.isSome(level) ? read : SimbaConfig.SimbaConfig.make({ ...read, logLevel: "Warning" })
    const context = yield* Layer.build(layerOf(name)).pipe(
      Effect.mapError((cause) => isUnreachable(cause) ? new UnreachableError({ backend: name, cause }) : cause)
    )
    const backend = yield* LeaseBackend.pipe(Effect.provide(context))
    const ttl = Duration.millis(config.leaseDuration)
    yield* backend.openSession(ttl).pipe(
      Effect.flatMap((opened) => backend.closeSession(opened.sessionId)),
      Effect.timeoutFail({
        duration: ttl,
        onTimeout: () => `no answer within ${Duration.format(ttl)}`
      }),
      Effect.mapError((cause) => new UnreachableError({ backend: name, cause }))
    )
    return { backend, config }
  }).pipe(Effect.withConfigProvider(providerOf(given, process.env)))

/** A failure to build a backend that is the store's absence, not a bad setting. */
const isUnreachable = (cause: unknown): boolean =>
  cause instanceof BackendError && cause.operation !== "loadDriver"

/** A client on the connected backend, living in the scope. */
export const client = (connected: Connected): Effect.Effect<Simba.SimbaClient, unknown, Scope.Scope> =>
  Simba.make(connected.config).pipe(Effect.provideService(LeaseBackend, connected.backend))
