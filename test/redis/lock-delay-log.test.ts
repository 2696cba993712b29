/**
 * The lock-delay a start pays on a store without a boot marker (a new Redis or key prefix, or a lost
 * state) is logged when it starts: what, how long, until when, and the option that turns it off;
 * otherwise the first lock just waits `lockDelay` with nothing said. Real Redis on 6379, a new key
 * prefix per case; logs captured with a custom `Logger`.
 */
import { describe, expect, it } from "@effect/vitest"
import * as Effect from "effect/Effect"
import * as HashMap from "effect/HashMap"
import * as List from "effect/List"
import * as Logger from "effect/Logger"
import * as LogLevel from "effect/LogLevel"
import { randomBytes } from "node:crypto"
import * as RedisBackend from "../../src/layers/redis/RedisBackend.js"
import { rawClient, serverTime } from "./RedisServers.js"

interface Line {
  readonly level: string
  readonly message: string
  readonly annotations: Record<string, unknown>
}

/** Starts a backend with `options` (closed again at once), every log line collected. */
const startLogged = (options: RedisBackend.RedisOptions) =>
  Effect.gen(function*() {
    const lines: Array<Line> = []
    const collector = Logger.make(({ annotations, logLevel, message }) => {
      const text = List.isList(message) ? List.toArray(message).join(" ") : Array.isArray(message) ? message.join(" ") : String(message)
      lines.push({ level: logLevel.label, message: text, annotations: Object.fromEntries(HashMap.toEntries(annotations)) })
    })
    yield* Effect.scoped(RedisBackend.make({ port: 6379, ...options })).pipe(
      Effect.provide(Logger.replace(Logger.defaultLogger, collector)),
      Logger.withMinimumLogLevel(LogLevel.All)
    )
    return lines.filter((line) => line.message.includes("boot marker"))
  })

/** A key prefix nobody used; its marker is deleted with the scope. */
const newPrefix = Effect.gen(function*() {
  const prefix = `simba-delay-log-${randomBytes(6).toString("hex")}`
  const raw = yield* rawClient(false)
  yield* Effect.addFinalizer(() => Effect.promise(() => raw.del(RedisBackend.keys(prefix).boot)))
  return { prefix, raw }
})

describe("Redis lock-delay at start", () => {
  it.scopedLive("a new key prefix: one Warning naming the delay, its end and the lockDelay option; a second start is silent", () =>
    Effect.gen(function*() {
      const { prefix, raw } = yield* newPrefix
      const [line, ...more] = yield* startLogged({ keyPrefix: prefix })
      expect(more).toEqual([])
      expect(line).toMatchObject({ level: "WARN", annotations: { backend: "redis" } })
      expect(line!.message).toContain(`${prefix}:boot`)
      expect(line!.message).toContain("No lease is granted for the lockDelay of 15000 ms")
      expect(line!.message).toContain("SIMBA_REDIS_LOCK_DELAY=0")
      // Until when: the marker's value, by the server's clock.
      const resume = Number(yield* Effect.promise(() => raw.get(RedisBackend.keys(prefix).boot)))
      expect(resume).toBeGreaterThan(yield* serverTime(raw))
      expect(line!.message).toContain(`until ${new Date(resume).toISOString()}`)
      // The marker exists now: a later start (the same delay or not) waits for nothing new and says nothing.
      expect(yield* startLogged({ keyPrefix: prefix })).toEqual([])
    }))

  it.scopedLive("lockDelay 0 on a new key prefix: no wait, nothing logged, and a later start with the default is silent", () =>
    Effect.gen(function*() {
      const { prefix } = yield* newPrefix
      expect(yield* startLogged({ keyPrefix: prefix, lockDelay: 0 })).toEqual([])
      expect(yield* startLogged({ keyPrefix: prefix })).toEqual([])
    }))
})
