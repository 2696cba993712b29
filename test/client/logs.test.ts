/**
 * The client's lifecycle logs (README "Logs", issue 8 item 4): derived from the events it publishes,
 * at fixed levels, annotated with lease, token, reason, sessionId and backend; `logLevel: "None"`
 * silences them. Logs are captured with a custom `Logger` collecting into a `Ref`; time is TestClock.
 */
import { describe, expect, it } from "@effect/vitest"
import { ConfigProvider, Effect, HashMap, List, Logger, LogLevel, Ref } from "effect"
import { LockTimeoutError, MemoryBackend, SimbaConfig } from "simba"
import type { SimbaConfigInput } from "../../src/SimbaConfig.js"
import { advance, config, makeClient } from "./helpers.js"

interface Line {
  readonly level: string
  readonly message: string
  readonly annotations: Record<string, unknown>
}

/** Runs `body` with every log line (at any level) collected; returns what `body` returns and the lines. */
const capturing = <A, E, R>(body: Effect.Effect<A, E, R>) =>
  Effect.gen(function*() {
    const lines = yield* Ref.make<ReadonlyArray<Line>>([])
    const collector = Logger.make(({ annotations, logLevel, message }) => {
      const text = List.isList(message) ? List.toArray(message).join(" ") : Array.isArray(message) ? message.join(" ") : String(message)
      const line: Line = { level: logLevel.label, message: text, annotations: Object.fromEntries(HashMap.toEntries(annotations)) }
      Effect.runSync(Ref.update(lines, (all) => [...all, line]))
    })
    const result = yield* body.pipe(Effect.provide(Logger.replace(Logger.defaultLogger, collector)))
    return { result, lines: yield* Ref.get(lines) }
  })

const about = (lines: ReadonlyArray<Line>, text: string) => lines.filter((l) => l.message.includes(text))

/** A client on a fresh in-memory backend, its session open. */
const openedClient = (options: SimbaConfigInput = config) =>
  Effect.gen(function*() {
    const c = yield* makeClient(yield* MemoryBackend.make(), options)
    yield* advance("100 millis")
    return c
  })

describe("lifecycle logs", () => {
  it.scoped("an election's elected and revoked at Info, with lease, token, reason, sessionId and backend", () =>
    Effect.gen(function*() {
      const { lines } = yield* capturing(Effect.gen(function*() {
        const c = yield* openedClient()
        const election = yield* c.client.election("job")
        yield* advance("100 millis")
        yield* election.stop
      }))
      const [opened] = about(lines, "SessionOpened")
      expect(opened).toMatchObject({ level: "INFO", annotations: { backend: "memory" } })
      const sessionId = opened!.annotations["sessionId"]
      expect(sessionId).toEqual(expect.any(String))
      expect(about(lines, "Elected job")).toEqual([
        expect.objectContaining({ level: "INFO", annotations: { backend: "memory", sessionId, kind: "election", lease: "job", token: "1" } })
      ])
      expect(about(lines, "Revoked job")).toEqual([
        expect.objectContaining({
          level: "INFO",
          annotations: { backend: "memory", sessionId, kind: "election", lease: "job", token: "1", reason: "STOPPED" }
        })
      ])
    }))

  it.scoped("a withLock's own start and end are Debug, so a lock-heavy application is not flooded at Info", () =>
    Effect.gen(function*() {
      const { lines } = yield* capturing(Effect.gen(function*() {
        const c = yield* openedClient({ ...config, logLevel: "All" })
        yield* c.client.withLock("job", Effect.void)
      }).pipe(Logger.withMinimumLogLevel(LogLevel.All)))
      expect(about(lines, "Elected job").map((l) => l.level)).toEqual(["DEBUG"])
      expect(about(lines, "Revoked job").map((l) => [l.level, l.annotations["kind"]])).toEqual([["DEBUG", "lock"]])
    }))

  it.scoped("suspension and backend failures at Warning, session loss at Error", () =>
    Effect.gen(function*() {
      const { lines } = yield* capturing(Effect.gen(function*() {
        const c = yield* openedClient()
        yield* c.faults.pause({ only: "keepAlive" })
        // 3 s lease, renewals every 1 s: the first renewal times out at 2 s, the deadline passes at ~3 s.
        yield* advance("4 seconds")
      }))
      const [suspended] = about(lines, "SessionSuspended")
      expect(suspended).toMatchObject({ level: "WARN", annotations: { backend: "memory", sessionId: expect.any(String) } })
      const failed = about(lines, "BackendFailed keepAlive")
      expect(failed.length).toBeGreaterThanOrEqual(1)
      expect(failed[0]).toMatchObject({ level: "WARN", annotations: { operation: "keepAlive", backend: "memory" } })
      const ended = about(lines, "SessionEnded")
      expect(ended[0]).toMatchObject({
        level: "ERROR",
        annotations: { reason: "DEADLINE_PASSED", sessionId: suspended!.annotations["sessionId"] }
      })
    }))

  it.scoped("a withLock waiting on a failing backend logs a warning for each failed attempt while it waits", () =>
    Effect.gen(function*() {
      const { lines, result } = yield* capturing(Effect.gen(function*() {
        const c = yield* openedClient()
        yield* c.faults.pause({ only: "acquire" })
        const waiting = yield* Effect.fork(Effect.either(c.client.withLock("orders", Effect.void, { timeout: "5 seconds" })))
        yield* advance("6 seconds")
        return yield* waiting.await
      }))
      expect(result._tag === "Success" && result.value._tag === "Left" && result.value.left).toBeInstanceOf(LockTimeoutError)
      const warnings = about(lines, "BackendFailed acquire").filter((l) => l.level === "WARN")
      // Each acquire hangs until its 1 s timeout, then the candidate retries: several failures in 5 s.
      expect(warnings.length).toBeGreaterThanOrEqual(2)
      expect(warnings[0]!.annotations).toMatchObject({ operation: "acquire", backend: "memory" })
    }))

  it.scoped("logLevel \"None\" silences every lifecycle line; \"Error\" keeps only errors", () =>
    Effect.gen(function*() {
      const run = (logLevel: SimbaConfigInput["logLevel"]) =>
        capturing(Effect.gen(function*() {
          const c = yield* openedClient({ ...config, logLevel })
          yield* c.client.withLock("job", Effect.void)
          yield* c.faults.pause({ only: "keepAlive" })
          yield* advance("4 seconds")
        }))
      const none = yield* run("None")
      expect(none.lines.filter((l) => l.message.startsWith("Simba:"))).toEqual([])
      const errors = yield* run("Error")
      const simba = errors.lines.filter((l) => l.message.startsWith("Simba:"))
      expect(simba.length).toBeGreaterThanOrEqual(1)
      expect(simba.every((l) => l.level === "ERROR")).toBe(true)
    }))

  it.effect("logLevel is validated, and read from SIMBA_LOG_LEVEL", () =>
    Effect.gen(function*() {
      const bad = yield* Effect.flip(SimbaConfig.make({ logLevel: "Loud" as never }))
      expect(bad).toMatchObject({ field: "logLevel" })
      expect((yield* SimbaConfig.make()).logLevel).toBe("Info")
      const fromEnv = (value: string) =>
        SimbaConfig.fromEnv.pipe(Effect.withConfigProvider(ConfigProvider.fromMap(new Map([["SIMBA_LOG_LEVEL", value]]))))
      expect((yield* fromEnv("None")).logLevel).toBe("None")
      expect(String(yield* Effect.flip(fromEnv("Loud")))).toContain("SIMBA_LOG_LEVEL")
    }))
})
