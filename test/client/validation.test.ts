import { describe, expect, it } from "@effect/vitest"
import { ConfigProvider, Effect, Layer, Schedule } from "effect"
import { InvalidLeaseNameError, LeaseName, MemoryBackend, Simba, SimbaConfig, SimbaConfigError } from "simba"
import { RedisBackend } from "simba/redis"
import { ZookeeperBackend } from "simba/zookeeper"
import { makeClient } from "./helpers.js"

const badNames: ReadonlyArray<readonly [string, string]> = [
  ["empty", ""],
  ["129 characters", "a".repeat(129)],
  ["a slash", "a/b"],
  ["a space", "a b"],
  ["non-ASCII", "café"],
  ["a single dot", "."],
  ["two dots", ".."]
]

describe("bad input", () => {
  for (const [label, name] of badNames) {
    it.scoped(`a name with ${label} fails with InvalidLeaseNameError everywhere, with no backend call`, () =>
      Effect.gen(function*() {
        const backend = yield* MemoryBackend.make()
        const { calls, client } = yield* makeClient(backend)
        const callsBefore = (yield* calls).length
        const errors = [
          yield* Effect.flip(client.withLock(name, Effect.void)),
          yield* Effect.flip(Effect.scoped(client.lock(name))),
          yield* Effect.flip(client.runWhileLeader(name, () => Effect.void)),
          yield* Effect.flip(Effect.scoped(client.election(name))),
          yield* Effect.flip(client.schedule(name, Schedule.spaced("1 second"), () => Effect.void)),
          yield* Effect.flip(client.partitionGroup(name, 4, () => Effect.void))
        ]
        for (const error of errors) {
          expect(error).toBeInstanceOf(InvalidLeaseNameError)
          expect(error).toMatchObject({ _tag: "InvalidLeaseNameError", lease: name })
          expect((error as InvalidLeaseNameError).rule.length).toBeGreaterThan(0)
        }
        expect((yield* calls).slice(callsBefore).filter((c) => c.name === name || c.operation !== "keepAlive"))
          .toEqual([])
      }))
  }

  it.effect("the longest valid name and every allowed character pass", () =>
    Effect.gen(function*() {
      expect(yield* LeaseName.validate("a".repeat(128))).toBe("a".repeat(128))
      expect(yield* LeaseName.validate("AZaz09._:-")).toBe("AZaz09._:-")
      expect(yield* LeaseName.validate("...")).toBe("...")
    }))

  const badConfigs: ReadonlyArray<readonly [SimbaConfig.SimbaConfigInput, string]> = [
    [{ leaseDuration: "soon" as never }, "leaseDuration"],
    [{ leaseDuration: 0 }, "leaseDuration"],
    [{ leaseDuration: -5 }, "leaseDuration"],
    [{ renewInterval: 0 }, "renewInterval"],
    [{ drift: 0.5 }, "drift"],
    [{ drift: -0.1 }, "drift"],
    [{ drift: Number.NaN }, "drift"],
    [{ margin: -1 }, "margin"],
    [{ retryJitter: -1 }, "retryJitter"],
    [{ minBackoff: 0 }, "minBackoff"],
    [{ leaseDuration: "3 seconds", renewInterval: "2 seconds" }, "renewInterval"],
    [{ leaseDuration: "1 second", renewInterval: "500 millis", margin: "500 millis" }, "margin"],
    [{ leaseDuration: "1 second", renewInterval: "400 millis", margin: "600 millis" }, "margin"]
  ]
  for (const [input, field] of badConfigs) {
    it.effect(`invalid config ${JSON.stringify(input)} fails with SimbaConfigError naming ${field}`, () =>
      Effect.gen(function*() {
        const error = yield* Effect.flip(SimbaConfig.make(input))
        expect(error).toBeInstanceOf(SimbaConfigError)
        expect(error.field).toBe(field)
        expect(error.message).toContain(field)
      }))
  }

  it.effect("defaults follow the spec", () =>
    Effect.gen(function*() {
      const config = yield* SimbaConfig.make()
      expect({ ...config }).toEqual({
        leaseDuration: 15000,
        renewInterval: 5000,
        drift: 0.01,
        margin: 50,
        retryJitter: 2500,
        minBackoff: 100,
        logLevel: "Info",
        lockKeep: 0
      })
    }))

  it.effect("the environment (SIMBA_*) configures the client; a bad variable is a SimbaConfigError", () =>
    Effect.gen(function*() {
      const fromEnv = (env: Record<string, string>) =>
        SimbaConfig.fromEnv.pipe(Effect.withConfigProvider(ConfigProvider.fromMap(new Map(Object.entries(env)))))
      const config = yield* fromEnv({ SIMBA_LEASE_DURATION: "6 seconds", SIMBA_DRIFT: "0.02", SIMBA_MARGIN: "20ms" })
      expect(config.leaseDuration).toBe(6000)
      expect(config.renewInterval).toBe(2000)
      expect(config.drift).toBe(0.02)
      expect(config.margin).toBe(20)
      const bad = yield* Effect.flip(fromEnv({ SIMBA_DRIFT: "lots" }))
      expect(bad).toBeInstanceOf(SimbaConfigError)
      const invalid = yield* Effect.flip(fromEnv({ SIMBA_LEASE_DURATION: "1 second", SIMBA_RENEW_INTERVAL: "900 millis" }))
      expect(invalid.field).toBe("renewInterval")
    }))

  describe("configuration from the environment: forms and messages", () => {
    const fromEnv = (env: Record<string, string>) =>
      SimbaConfig.fromEnv.pipe(Effect.withConfigProvider(ConfigProvider.fromMap(new Map(Object.entries(env)))))

    it.effect("durations take a unit: 8s, 500ms, 2m, 1.5s, 15 seconds (and 0 alone)", () =>
      Effect.gen(function*() {
        const config = yield* fromEnv({
          SIMBA_LEASE_DURATION: "2m",
          SIMBA_RENEW_INTERVAL: "8s",
          SIMBA_MARGIN: "500ms",
          SIMBA_RETRY_JITTER: "1.5s",
          SIMBA_MIN_BACKOFF: " 15 seconds "
        })
        expect([config.leaseDuration, config.renewInterval, config.margin, config.retryJitter, config.minBackoff])
          .toEqual([120_000, 8_000, 500, 1_500, 15_000])
        expect((yield* fromEnv({ SIMBA_MARGIN: "0" })).margin).toBe(0)
      }))

    it.effect("a bare number is refused, naming the variable and its value, with the fix", () =>
      Effect.gen(function*() {
        const error = yield* Effect.flip(fromEnv({ SIMBA_LEASE_DURATION: "15" }))
        expect(error).toMatchObject({
          _tag: "SimbaConfigError",
          field: "leaseDuration",
          variable: "SIMBA_LEASE_DURATION",
          value: `"15"`
        })
        expect(error.message).toBe(
          `invalid Simba configuration, SIMBA_LEASE_DURATION="15" (leaseDuration): must be a duration with a unit, ` +
            `such as "8s", "500ms", "2m", "1.5s" or "15 seconds" (a bare number is refused: write "15s" or "15ms")`
        )
      }))

    it.effect("an unknown unit or text names the variable, the value and the accepted forms", () =>
      Effect.gen(function*() {
        const unit = yield* Effect.flip(fromEnv({ SIMBA_RENEW_INTERVAL: "8 fortnights" }))
        expect(unit).toMatchObject({ field: "renewInterval", variable: "SIMBA_RENEW_INTERVAL", value: `"8 fortnights"` })
        expect(unit.rule).toBe(
          `must be a duration with a unit, such as "8s", "500ms", "2m", "1.5s" or "15 seconds" ` +
            `("fortnights" is not a unit: use ns, us, ms, s, m, h, d, w or their long names)`
        )
        const text = yield* Effect.flip(fromEnv({ SIMBA_MIN_BACKOFF: "soon" }))
        expect(text.message).toBe(
          `invalid Simba configuration, SIMBA_MIN_BACKOFF="soon" (minBackoff): ` +
            `must be a duration with a unit, such as "8s", "500ms", "2m", "1.5s" or "15 seconds"`
        )
        const drift = yield* Effect.flip(fromEnv({ SIMBA_DRIFT: "lots" }))
        expect(drift).toMatchObject({ field: "drift", variable: "SIMBA_DRIFT", value: `"lots"` })
        expect(drift.rule).toBe(`must be a number in [0, 0.5), such as 0.01`)
      }))

    it.effect("a broken timing rule names the variables set and the numbers", () =>
      Effect.gen(function*() {
        const renew = yield* Effect.flip(fromEnv({ SIMBA_LEASE_DURATION: "1s", SIMBA_RENEW_INTERVAL: "900ms" }))
        expect(renew.message).toBe(
          `invalid Simba configuration, renewInterval (from SIMBA_LEASE_DURATION="1s", SIMBA_RENEW_INTERVAL="900ms"): ` +
            `renewInterval × 2 must be at most leaseDuration (900 ms × 2 > 1000 ms)`
        )
        const margin = yield* Effect.flip(fromEnv({ SIMBA_LEASE_DURATION: "1s", SIMBA_MARGIN: "700ms" }))
        expect(margin.message).toBe(
          `invalid Simba configuration, margin (from SIMBA_LEASE_DURATION="1s", SIMBA_MARGIN="700ms"): ` +
            `leaseDuration × (1 − drift) − margin must exceed renewInterval ` +
            `(1000 ms × (1 − 0.01) − 700 ms = 290 ms, not more than 333.333 ms)`
        )
        const negative = yield* Effect.flip(SimbaConfig.make({ leaseDuration: 0 }))
        expect(negative.message).toBe("invalid Simba configuration, leaseDuration=0: must be positive")
      }))

    it.effect("the backends' duration options take the same forms and say why they refuse one", () =>
      Effect.gen(function*() {
        const error = yield* Effect.flip(
          Effect.scoped(Layer.build(RedisBackend.layer({ url: "redis://127.0.0.1:1", connectTimeout: "10" as never })))
        )
        expect(error).toMatchObject({
          _tag: "SimbaConfigError",
          field: "redis.connectTimeout",
          value: `"10"`,
          rule: `must be a duration with a unit, such as "8s", "500ms", "2m", "1.5s" or "15 seconds" ` +
            `(a bare number is refused: write "10s" or "10ms")`
        })
        const zk = yield* Effect.flip(
          Effect.scoped(Layer.build(ZookeeperBackend.layer({ connectTimeout: "3 weeks ago" as never })))
        )
        expect(zk).toMatchObject({ _tag: "SimbaConfigError", field: "zookeeper.connectTimeout" })
      }))
  })

  it.effect("Simba.make and Simba.layer refuse an invalid config", () =>
    Effect.gen(function*() {
      const error = yield* Effect.flip(
        Effect.scoped(Layer.build(Simba.layer({ drift: 0.7 }).pipe(Layer.provide(MemoryBackend.layer()))))
      )
      expect(error).toMatchObject({ _tag: "SimbaConfigError", field: "drift" })
    }))

  it.scoped("partitionGroup refuses a partition count that is not a positive integer", () =>
    Effect.gen(function*() {
      const backend = yield* MemoryBackend.make()
      const { client } = yield* makeClient(backend)
      for (const n of [0, -1, 1.5, Number.NaN]) {
        const error = yield* Effect.flip(client.partitionGroup("g", n, () => Effect.void))
        expect(error).toMatchObject({ _tag: "SimbaConfigError", field: "partitions" })
      }
    }))
})
