/**
 * The options of the client and of every backend, read by one module (`src/internal/options.ts`):
 * every duration option and variable takes the same forms and refuses the same ones, and every error
 * names the option (and the variable, from the environment), the value and the rule, never a password.
 * No server is needed: every case fails, or is read, before any connection.
 */
import { describe, expect, it } from "@effect/vitest"
import { ConfigProvider, Duration, Effect, Layer } from "effect"
import { MemoryBackend, SimbaConfig, SimbaConfigError } from "simba"
import { MysqlBackend } from "simba/mysql"
import { PgBackend } from "simba/postgres"
import { RedisBackend } from "simba/redis"
import { ZookeeperBackend } from "simba/zookeeper"
import * as Options from "../src/internal/options.js"
import * as RedisOptions from "../src/layers/redis/options.js"
import * as SqlOptions from "../src/layers/sql/options.js"
import * as ZookeeperOptions from "../src/layers/zookeeper/options.js"

const fromEnv = (env: Record<string, string>) =>
  Effect.withConfigProvider(ConfigProvider.fromMap(new Map(Object.entries(env))))

/** The error an effect fails with, which must be a `SimbaConfigError`. */
const configError = <A, E>(effect: Effect.Effect<A, E>) =>
  Effect.map(Effect.flip(effect), (error) => {
    if (!(error instanceof SimbaConfigError)) expect.fail(`expected SimbaConfigError, got ${String(error)}`)
    return error
  })

/** Text as code may pass it: the typed forms, and text that breaks them (refused at run time). */
const asOption = (text: string) => text as Options.DurationOption

// The text forms are typed: code writes them without a cast.
const typed: ReadonlyArray<Options.DurationOption> = ["8s", "500ms", "2m", "1.5s", "15 seconds", "3 millis", Duration.seconds(1), 250]

const accepted: ReadonlyArray<readonly [string, number]> = [
  ["8s", 8_000],
  ["500ms", 500],
  ["2m", 120_000],
  ["1.5s", 1_500],
  ["15 seconds", 15_000]
]
const refused = ["8", "abc"] as const

/** A duration setting: how a value given as text is read back, in milliseconds. */
interface DurationSetting {
  readonly field: string
  /** The environment variable, for a setting read from one. */
  readonly variable?: string
  readonly read: (text: string) => Effect.Effect<number, unknown>
}

// Room for every value above: the timing rules between the client's fields hold whatever the one tried.
const roomy: SimbaConfig.SimbaConfigInput = { leaseDuration: "1h" }
const roomyEnv = { SIMBA_LEASE_DURATION: "1h" }

const clientField = (field: keyof SimbaConfig.SimbaConfigInput & keyof SimbaConfig.SimbaConfig): DurationSetting => ({
  field,
  read: (text) =>
    Effect.map(
      SimbaConfig.make({ ...(field === "leaseDuration" ? {} : roomy), [field]: asOption(text) }),
      (c) => c[field] as number
    )
})

const clientVariable = (field: keyof SimbaConfig.SimbaConfig, variable: string): DurationSetting => ({
  field,
  variable,
  read: (text) =>
    Effect.map(
      SimbaConfig.fromEnv.pipe(fromEnv({ ...(field === "leaseDuration" ? {} : roomyEnv), [variable]: text })),
      (c) => c[field] as number
    )
})

const redisOption = (option: "connectTimeout" | "commandTimeout" | "idleExpiry" | "lockDelay"): DurationSetting => ({
  field: `redis.${option}`,
  read: (text) =>
    Effect.map(RedisOptions.resolve({ [option]: asOption(text) }), (settings) =>
      option === "idleExpiry" ? settings.idleMs : option === "lockDelay" ? settings.delayMs : settings[option])
})

const settings: ReadonlyArray<DurationSetting> = [
  clientField("leaseDuration"),
  clientField("renewInterval"),
  clientField("margin"),
  clientField("retryJitter"),
  clientField("minBackoff"),
  clientVariable("leaseDuration", "SIMBA_LEASE_DURATION"),
  clientVariable("renewInterval", "SIMBA_RENEW_INTERVAL"),
  clientVariable("margin", "SIMBA_MARGIN"),
  clientVariable("retryJitter", "SIMBA_RETRY_JITTER"),
  clientVariable("minBackoff", "SIMBA_MIN_BACKOFF"),
  redisOption("connectTimeout"),
  redisOption("commandTimeout"),
  redisOption("idleExpiry"),
  redisOption("lockDelay"),
  {
    field: "redis.lockDelay",
    variable: "SIMBA_REDIS_LOCK_DELAY",
    read: (text) =>
      Effect.map(
        Effect.flatMap(RedisBackend.config, RedisOptions.resolve).pipe(fromEnv({ SIMBA_REDIS_LOCK_DELAY: text })),
        (s) => s.delayMs
      )
  },
  {
    field: "zookeeper.connectTimeout",
    read: (text) => Effect.map(ZookeeperOptions.resolve({ connectTimeout: asOption(text) }), (s) => s.connectTimeout)
  },
  {
    field: "mysql.pollInterval",
    read: (text) => Effect.map(SqlOptions.pollIntervalOf("mysql", { pollInterval: asOption(text) }), Duration.toMillis)
  },
  {
    field: "memory.maxTtl",
    read: (text) =>
      Effect.flatMap(MemoryBackend.make({ maxTtl: asOption(text) }), (backend) =>
        Effect.map(backend.openSession(Duration.hours(10)), ({ remaining }) => Duration.toMillis(remaining)))
  }
]

describe("duration settings: the same forms everywhere", () => {
  for (const setting of settings) {
    const name = setting.variable ?? setting.field
    it.effect(`${name} takes 8s, 500ms, 2m, 1.5s and 15 seconds`, () =>
      Effect.gen(function*() {
        for (const [text, millis] of accepted) expect(yield* setting.read(text)).toBe(millis)
      }))

    it.effect(`${name} refuses 8 and abc, naming ${setting.variable === undefined ? "the option" : "the variable"}, the value and the rule`, () =>
      Effect.gen(function*() {
        for (const text of refused) {
          const error = yield* configError(setting.read(text))
          expect(error.field).toBe(setting.field)
          expect(error.variable).toBe(setting.variable)
          expect(error.value).toBe(JSON.stringify(text))
          expect(error.rule).toContain(`must be a duration with a unit, such as "8s", "500ms", "2m", "1.5s" or "15 seconds"`)
          if (text === "8") expect(error.rule).toContain(`a bare number is refused: write "8s" or "8ms"`)
          expect(error.message).toBe(
            setting.variable === undefined
              ? `invalid Simba configuration, ${setting.field}="${text}": ${error.rule}`
              : `invalid Simba configuration, ${setting.variable}="${text}" (${setting.field}): ${error.rule}`
          )
        }
      }))
  }

  it.effect("a backend's layer from the environment fails before connecting, naming the variable", () =>
    Effect.gen(function*() {
      const error = yield* configError(
        Effect.scoped(Layer.build(RedisBackend.layerConfig(RedisBackend.config))).pipe(
          fromEnv({ SIMBA_REDIS_URL: "redis://127.0.0.1:1", SIMBA_REDIS_LOCK_DELAY: "8" })
        )
      )
      expect(error.message).toBe(
        `invalid Simba configuration, SIMBA_REDIS_LOCK_DELAY="8" (redis.lockDelay): must be a duration with a unit, ` +
          `such as "8s", "500ms", "2m", "1.5s" or "15 seconds" (a bare number is refused: write "8s" or "8ms")`
      )
    }))

  it.effect("MysqlBackend.make takes pollInterval too, and checks it before connecting", () =>
    Effect.gen(function*() {
      // port 1: a connect would fail with BackendError; the option's error must come first
      const error = yield* Effect.flip(Effect.scoped(MysqlBackend.make({ url: "mysql://root@127.0.0.1:1/none", pollInterval: asOption("8") })))
      expect(error).toBeInstanceOf(SimbaConfigError)
      expect(error).toMatchObject({ field: "mysql.pollInterval" })
    }))

  it.effect("in code, any Duration.DurationInput; a number is milliseconds; bounds and finiteness are checked", () =>
    Effect.gen(function*() {
      for (const input of typed) expect(yield* Effect.either(RedisOptions.resolve({ connectTimeout: input }))).toMatchObject({ _tag: "Right" })
      const connectTimeout = (input: Options.DurationOption) =>
        Effect.map(RedisOptions.resolve({ connectTimeout: input }), (s) => s.connectTimeout)
      expect(yield* connectTimeout(Duration.seconds(2))).toBe(2_000)
      expect(yield* connectTimeout(250)).toBe(250)
      expect(yield* connectTimeout("3 seconds")).toBe(3_000)
      expect(yield* connectTimeout("1 week")).toBe(604_800_000)
      expect((yield* configError(connectTimeout(Duration.infinity))).rule).toBe("must be finite")
      expect((yield* configError(connectTimeout(0))).message).toBe(
        "invalid Simba configuration, redis.connectTimeout=0: must be at least 1 ms"
      )
      expect((yield* configError(SimbaConfig.make({ margin: -1 }))).message).toBe(
        "invalid Simba configuration, margin=-1: must not be negative"
      )
      expect((yield* configError(MemoryBackend.make({ maxTtl: "0s" }))).message).toBe(
        `invalid Simba configuration, memory.maxTtl="0s": must be positive`
      )
      expect((yield* configError(SimbaConfig.make({ leaseDuration: asOption("8 fortnights") }))).rule).toContain(
        `"fortnights" is not a unit: use ns, us, ms, s, m, h, d, w or their long names`
      )
    }))
})

describe("errors from the environment name the variable, its value and the rule", () => {
  const redis = Effect.flatMap(RedisBackend.config, RedisOptions.resolve)
  const pg = Effect.flatMap(PgBackend.config, (options) => SqlOptions.resolve("postgres", options, PgBackend.defaultUrl))
  const mysql = Effect.flatMap(MysqlBackend.config, (options) => SqlOptions.resolve("mysql", options, MysqlBackend.defaultUrl))
  const zookeeper = Effect.flatMap(ZookeeperBackend.config, ZookeeperOptions.resolve)
  const hostPorts = "must be host:port[,host:port...] with ports in 1..65535"
  // [variable, value, what reads it, option, rule]
  const cases: ReadonlyArray<readonly [string, string, Effect.Effect<unknown, unknown>, string, string]> = [
    ["SIMBA_REDIS_URL", "http://127.0.0.1:6379", redis, "redis.url", "must start with redis:// or rediss://"],
    ["SIMBA_REDIS_KEY_PREFIX", "has space", redis, "redis.keyPrefix", "may contain only the characters [A-Za-z0-9._:-], at least one"],
    ["SIMBA_REDIS_ALLOW_EVICTION_POLICY", "maybe", redis, "redis.allowEvictionPolicy", "must be true or false (or yes/no, on/off, 1/0)"],
    ["SIMBA_REDIS_FUNCTIONS", "perhaps", redis, "redis.functions", "must be true or false (or yes/no, on/off, 1/0)"],
    ["SIMBA_REDIS_CLUSTER", "127.0.0.1", redis, "redis.cluster", `${hostPorts} ("127.0.0.1" is not)`],
    ["SIMBA_PG_MAX_CONNECTIONS", "0", pg, "postgres.maxConnections", "must be a positive integer"],
    ["SIMBA_PG_TABLE_PREFIX", "Simba-", pg, "postgres.tablePrefix", "must be a lowercase letter followed by at most 29 of [a-z0-9_]"],
    ["SIMBA_MYSQL_MAX_CONNECTIONS", "ten", mysql, "mysql.maxConnections", "must be a whole number"],
    ["SIMBA_ZK_CONNECT", "no-port", zookeeper, "zookeeper.connect", `${hostPorts} ("no-port" is not)`],
    ["SIMBA_ZK_ROOT", "relative", zookeeper, "zookeeper.root", "must be an absolute path of at least one segment, without a trailing slash"],
    ["SIMBA_DRIFT", "lots", SimbaConfig.fromEnv, "drift", "must be a number in [0, 0.5), such as 0.01"],
    ["SIMBA_DRIFT", "0.7", SimbaConfig.fromEnv, "drift", "must be in [0, 0.5)"],
    ["SIMBA_LOG_LEVEL", "Loud", SimbaConfig.fromEnv, "logLevel", "must be one of All, Trace, Debug, Info, Warning, Error, Fatal, None"]
  ]
  for (const [variable, value, read, field, rule] of cases) {
    it.effect(`${variable}=${JSON.stringify(value)}`, () =>
      Effect.gen(function*() {
        const error = yield* configError(read.pipe(fromEnv({ [variable]: value })))
        expect({ field: error.field, variable: error.variable, value: error.value, rule: error.rule })
          .toEqual({ field, variable, value: JSON.stringify(value), rule })
        expect(error.message).toBe(`invalid Simba configuration, ${variable}=${JSON.stringify(value)} (${field}): ${rule}`)
      }))
  }

  it.effect("an option changed after it was read is named as an option, not as the variable", () =>
    Effect.gen(function*() {
      const options = yield* RedisBackend.config.pipe(fromEnv({ SIMBA_REDIS_KEY_PREFIX: "fine" }))
      const error = yield* configError(RedisOptions.resolve({ ...options, keyPrefix: "not fine" }))
      expect(error.variable).toBeUndefined()
      expect(error.message).toBe(
        `invalid Simba configuration, redis.keyPrefix="not fine": may contain only the characters [A-Za-z0-9._:-], at least one`
      )
      // A variable that could not be read, whose option was then given in code, is not reported.
      const unread = yield* RedisBackend.config.pipe(fromEnv({ SIMBA_REDIS_LOCK_DELAY: "8" }))
      expect((yield* RedisOptions.resolve({ ...unread, lockDelay: "8s" })).delayMs).toBe(8_000)
    }))
})

describe("a URL's password is never shown", () => {
  const secret = "s3cr3t-pw"
  const urls = [
    `http://app:${secret}@127.0.0.1:6379`,
    `redis://app:${secret}@[bad`,
    `redis://:${secret}@127.0.0.1:6379/zero`,
    `redis://app:a/${secret}@127.0.0.1:6379`
  ]
  it.effect("in code and from the environment, the URL is shown with the password replaced by ***", () =>
    Effect.gen(function*() {
      for (const url of urls) {
        const errors = [
          yield* configError(RedisOptions.resolve({ url })),
          yield* configError(Effect.flatMap(RedisBackend.config, RedisOptions.resolve).pipe(fromEnv({ SIMBA_REDIS_URL: url }))),
          yield* configError(SqlOptions.resolve("postgres", { url }, PgBackend.defaultUrl)),
          yield* configError(
            Effect.flatMap(PgBackend.config, (options) => SqlOptions.resolve("postgres", options, PgBackend.defaultUrl)).pipe(
              fromEnv({ SIMBA_PG_URL: url })
            )
          )
        ]
        for (const error of errors) {
          expect(error.message).not.toContain(secret)
          expect(JSON.stringify(error)).not.toContain(secret)
          expect(error.value).toContain("***")
        }
      }
      const error = yield* configError(RedisOptions.resolve({ url: `http://app:${secret}@127.0.0.1:6379` }))
      expect(error.message).toBe(
        `invalid Simba configuration, redis.url="http://app:***@127.0.0.1:6379": must start with redis:// or rediss://`
      )
    }))

  it("redactUrl hides the password of the user info and of query parameters, and nothing else", () => {
    expect(Options.redactUrl("postgres://app:pw@db:5432/x")).toBe("postgres://app:***@db:5432/x")
    expect(Options.redactUrl("postgres://app@db:5432/x")).toBe("postgres://app@db:5432/x")
    expect(Options.redactUrl("redis://:p@ss@host:6379/0")).toBe("redis://:***@host:6379/0")
    expect(Options.redactUrl("postgres://db/x?user=app&password=pw&sslmode=require"))
      .toBe("postgres://db/x?user=app&password=***&sslmode=require")
    expect(Options.redactUrl("127.0.0.1:2181")).toBe("127.0.0.1:2181")
  })
})
