/**
 * `SessionLeaseShortened` on ZooKeeper: a renewal proves 5/12 of the negotiated session timeout, so
 * every grant is shorter than `leaseDuration` by the backend's own rule; the client warns only when
 * the server granted a shorter timeout than asked. The standalone server at 127.0.0.1:2181 allows
 * session timeouts of 1 to 60 s (`scripts/services.sh`). Real time; logs captured (the event and its
 * log line are published together).
 */
import { describe, expect, it } from "@effect/vitest"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as HashMap from "effect/HashMap"
import * as List from "effect/List"
import * as Logger from "effect/Logger"
import * as LogLevel from "effect/LogLevel"
import type * as Scope from "effect/Scope"
import { LeaseBackend } from "../../src/LeaseBackend.js"
import * as ZookeeperBackend from "../../src/layers/zookeeper/ZookeeperBackend.js"
import * as Simba from "../../src/Simba.js"
import type { SimbaConfigInput } from "../../src/SimbaConfig.js"
import { standalone } from "./ZookeeperServers.js"

interface Line {
  readonly level: string
  readonly message: string
  readonly annotations: Record<string, unknown>
}

/**
 * A client on ZooKeeper with `config`, run until its session is live and renewed once (the decision
 * to warn is made on the first reply); every log line collected.
 */
const run = (config: SimbaConfigInput, live: Duration.DurationInput): Effect.Effect<ReadonlyArray<Line>, unknown, Scope.Scope> =>
  Effect.gen(function*() {
    const lines: Array<Line> = []
    const collector = Logger.make(({ annotations, logLevel, message }) => {
      const text = List.isList(message) ? List.toArray(message).join(" ") : Array.isArray(message) ? message.join(" ") : String(message)
      lines.push({ level: logLevel.label, message: text, annotations: Object.fromEntries(HashMap.toEntries(annotations)) })
    })
    yield* Effect.scoped(Effect.gen(function*() {
      const backend = yield* ZookeeperBackend.make(standalone)
      const client = yield* Simba.make(config).pipe(Effect.provideService(LeaseBackend, backend))
      yield* Effect.sleep(live)
      expect((yield* client.snapshot).session.status).toBe("LIVE")
    })).pipe(Effect.provide(Logger.replace(Logger.defaultLogger, collector)), Logger.withMinimumLogLevel(LogLevel.All))
    return lines
  })

const shortened = (lines: ReadonlyArray<Line>) => lines.filter((line) => line.message.includes("SessionLeaseShortened"))

describe("ZooKeeper: SessionLeaseShortened", () => {
  it.scopedLive("default settings: the server grants the 15 s asked, 5/12 of it proven; nothing shortened is published", () =>
    Effect.gen(function*() {
      // The backend's own rule, as the client reads it: 15 s asked, 6.25 s answered for a full grant.
      const backend = yield* ZookeeperBackend.make(standalone)
      expect(Duration.toMillis(backend.remainingFor!(Duration.seconds(15)))).toBe(6250)
      // Up past the first renewal (every ~2 s: a third of the 6.25 s a renewal proves).
      const lines = yield* run({}, "2500 millis")
      expect(lines.some((line) => line.message.includes("SessionOpened"))).toBe(true)
      expect(shortened(lines)).toEqual([])
      expect(lines.filter((line) => line.level === "WARN" || line.level === "ERROR")).toEqual([])
    }))

  it.scopedLive("a server that caps the timeout (90 s asked, its maxSessionTimeout 60 s): one Warning", () =>
    Effect.gen(function*() {
      const lines = yield* run({ leaseDuration: "90 seconds" }, "1500 millis")
      // 60 s granted, 5/12 of it proven: 25 s, below the 37.5 s of a full grant.
      expect(shortened(lines)).toEqual([
        expect.objectContaining({ level: "WARN", message: expect.stringContaining("SessionLeaseShortened granted=25000ms") })
      ])
    }))
})
