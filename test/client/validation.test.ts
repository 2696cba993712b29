import { describe, expect, it } from "@effect/vitest"
import { ConfigProvider, Effect, Layer, Schedule } from "effect"
import { InvalidLeaseNameError, LeaseName, MemoryBackend, Simba, SimbaConfig, SimbaConfigError } from "simba"
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
        const backend = yield* MemoryBackend.make
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
        minBackoff: 100
      })
    }))

  it.effect("the environment (SIMBA_*) configures the client; a bad variable is a SimbaConfigError", () =>
    Effect.gen(function*() {
      const fromEnv = (env: Record<string, string>) =>
        SimbaConfig.fromEnv.pipe(Effect.withConfigProvider(ConfigProvider.fromMap(new Map(Object.entries(env)))))
      const config = yield* fromEnv({ SIMBA_LEASE_DURATION: "6 seconds", SIMBA_DRIFT: "0.02", SIMBA_MARGIN: "20" })
      expect(config.leaseDuration).toBe(6000)
      expect(config.renewInterval).toBe(2000)
      expect(config.drift).toBe(0.02)
      expect(config.margin).toBe(20)
      const bad = yield* Effect.flip(fromEnv({ SIMBA_DRIFT: "lots" }))
      expect(bad).toBeInstanceOf(SimbaConfigError)
      const invalid = yield* Effect.flip(fromEnv({ SIMBA_LEASE_DURATION: "1 second", SIMBA_RENEW_INTERVAL: "900 millis" }))
      expect(invalid.field).toBe("renewInterval")
    }))

  it.effect("Simba.make and Simba.layer refuse an invalid config", () =>
    Effect.gen(function*() {
      const error = yield* Effect.flip(
        Effect.scoped(Layer.build(Simba.layer({ drift: 0.7 }).pipe(Layer.provide(MemoryBackend.layer()))))
      )
      expect(error).toMatchObject({ _tag: "SimbaConfigError", field: "drift" })
    }))

  it.scoped("partitionGroup refuses a partition count that is not a positive integer", () =>
    Effect.gen(function*() {
      const backend = yield* MemoryBackend.make
      const { client } = yield* makeClient(backend)
      for (const n of [0, -1, 1.5, Number.NaN]) {
        const error = yield* Effect.flip(client.partitionGroup("g", n, () => Effect.void))
        expect(error).toMatchObject({ _tag: "SimbaConfigError", field: "partitions" })
      }
    }))
})
