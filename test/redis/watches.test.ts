/**
 * Which lease channels the Redis backend's subscriber hears (`watches.ts`), as a pure bookkeeping of
 * sends, confirmations and waits, under `TestClock` (the sweep's timer). The subscriber here records
 * what it is asked and confirms when the test says so; the real server is in redis-backend.test.ts.
 */
import { describe, expect, it } from "@effect/vitest"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as TestClock from "effect/TestClock"
import { Hint } from "../../src/LeaseBackend.js"
import * as Watches from "../../src/layers/redis/watches.js"

/** A subscriber whose `SUBSCRIBE`s wait for `confirm`, and what the watches emitted. */
const setUp = Effect.gen(function*() {
  const log: Array<string> = []
  const pending = new Map<string, { resolve: () => void; reject: (error: Error) => void }>()
  const hints: Array<Hint> = []
  const errors: Array<unknown> = []
  const subscriber = { up: true }
  const watches = yield* Watches.make(
    (name) => `lease:{${name}}`,
    (sessionId) => `session:{${sessionId}}`,
    {
      subscribe: (channel) =>
        new Promise<void>((resolve, reject) => {
          log.push(`SUBSCRIBE ${channel}`)
          pending.set(channel, { resolve, reject })
        }),
      unsubscribe: (channel) => {
        log.push(`UNSUBSCRIBE ${channel}`)
        return Promise.resolve()
      },
      isReady: () => subscriber.up
    },
    (hint) => hints.push(hint),
    (error) => errors.push(error)
  )
  /** The server confirms (or refuses) the `SUBSCRIBE` of `channel`; the promise callbacks run. */
  const settleChannel = (channel: string, error?: Error) =>
    Effect.promise(async () => {
      const waiting = pending.get(channel)
      if (waiting === undefined) throw new Error(`no SUBSCRIBE pending for ${channel}`)
      pending.delete(channel)
      if (error === undefined) waiting.resolve()
      else waiting.reject(error)
      await new Promise((resolve) => setImmediate(resolve))
    })
  /** The same for the channel of lease `name`. */
  const settle = (name: string, error?: Error) => settleChannel(`lease:{${name}}`, error)
  /** The same for the channel of session `sessionId`. */
  const settleSession = (sessionId: string, error?: Error) => settleChannel(`session:{${sessionId}}`, error)
  /** `sessionId` is refused each of `names` and each channel is confirmed. */
  const waitConfirmed = (sessionId: string, ...names: ReadonlyArray<string>) =>
    Effect.gen(function*() {
      for (const name of names) watches.refused(sessionId, name, watches.sent())
      for (const name of names) yield* settle(name)
    })
  return { watches, log, hints, errors, settle, settleSession, subscriber, waitConfirmed }
})

const released = (name: string) => Hint.Released({ name })

describe("Redis lease channel watches", () => {
  it.scoped("a refusal subscribes the channel; its confirmation hints the waiter once; a later refusal does not", () =>
    Effect.gen(function*() {
      const { hints, log, settle, watches } = yield* setUp
      const sentAt = watches.sent()
      watches.refused("s1", "a", sentAt)
      expect(log).toEqual(["SUBSCRIBE lease:{a}"])
      expect(hints).toEqual([])
      // A second waiter while the SUBSCRIBE is in flight: no second SUBSCRIBE, the confirmation covers both.
      watches.refused("s2", "a", watches.sent())
      yield* settle("a")
      expect(log).toEqual(["SUBSCRIBE lease:{a}"])
      expect(hints).toEqual([released("a")])
      // Sent after the confirmation: nothing could be missed.
      watches.refused("s3", "a", watches.sent())
      expect(hints).toEqual([released("a")])
      expect(watches.size()).toBe(1)
    }))

  it.scoped("an acquire sent before the confirmation and refused after it is hinted at once", () =>
    Effect.gen(function*() {
      const { hints, settle, watches } = yield* setUp
      watches.refused("s1", "a", watches.sent())
      const early = watches.sent()
      yield* settle("a")
      expect(hints).toEqual([released("a")])
      watches.refused("s2", "a", early)
      expect(hints).toEqual([released("a"), released("a")])
    }))

  it.scoped("nobody waiting when the confirmation comes: no hint", () =>
    Effect.gen(function*() {
      const { hints, settle, watches } = yield* setUp
      watches.refused("s1", "a", watches.sent())
      watches.done("s1", "a")
      yield* settle("a")
      expect(hints).toEqual([])
    }))

  it.scoped("a channel nobody waits for is unsubscribed after one to two lingers, not before", () =>
    Effect.gen(function*() {
      const { log, waitConfirmed, watches } = yield* setUp
      yield* waitConfirmed("s1", "a", "b")
      watches.done("s1", "a") // granted
      // "b" still waited for: it stays, whatever the time.
      yield* TestClock.adjust(Duration.millis(Watches.lingerMillis))
      expect(log.filter((line) => line.startsWith("UNSUBSCRIBE"))).toEqual([])
      yield* TestClock.adjust(Duration.millis(Watches.lingerMillis))
      expect(log.filter((line) => line.startsWith("UNSUBSCRIBE"))).toEqual(["UNSUBSCRIBE lease:{a}"])
      expect(watches.size()).toBe(1)
      // A session that ends waits for nothing.
      watches.ended("s1")
      yield* TestClock.adjust(Duration.millis(2 * Watches.lingerMillis))
      expect(log.filter((line) => line.startsWith("UNSUBSCRIBE"))).toEqual(["UNSUBSCRIBE lease:{a}", "UNSUBSCRIBE lease:{b}"])
      expect(watches.size()).toBe(0)
    }))

  it.scoped("waited for again within the linger: kept, and not hinted again", () =>
    Effect.gen(function*() {
      const { hints, log, settle, watches } = yield* setUp
      watches.refused("s1", "a", watches.sent())
      yield* settle("a")
      watches.done("s1", "a")
      yield* TestClock.adjust(Duration.millis(Watches.lingerMillis))
      watches.refused("s1", "a", watches.sent())
      watches.done("s1", "a")
      yield* TestClock.adjust(Duration.millis(Watches.lingerMillis))
      expect(log).toEqual(["SUBSCRIBE lease:{a}"])
      expect(hints).toEqual([released("a")])
      // After an unsubscribe, a new wait subscribes anew and is hinted on its confirmation.
      yield* TestClock.adjust(Duration.millis(Watches.lingerMillis))
      expect(log).toEqual(["SUBSCRIBE lease:{a}", "UNSUBSCRIBE lease:{a}"])
      watches.refused("s1", "a", watches.sent())
      yield* settle("a")
      expect(log).toEqual(["SUBSCRIBE lease:{a}", "UNSUBSCRIBE lease:{a}", "SUBSCRIBE lease:{a}"])
      expect(hints).toEqual([released("a"), released("a")])
    }))

  it.scoped("a failed SUBSCRIBE is reported, not hinted; the next refusal subscribes again", () =>
    Effect.gen(function*() {
      const { errors, hints, log, settle, watches } = yield* setUp
      watches.refused("s1", "a", watches.sent())
      yield* settle("a", new Error("Connection is closed."))
      expect(errors.map(String)).toEqual(["Error: Connection is closed."])
      expect(hints).toEqual([])
      expect(watches.size()).toBe(0)
      watches.refused("s1", "a", watches.sent())
      expect(log).toEqual(["SUBSCRIBE lease:{a}", "SUBSCRIBE lease:{a}"])
    }))

  it.scoped("after a reconnection every waited name is hinted, and a refusal sent before it is hinted again", () =>
    Effect.gen(function*() {
      const { hints, waitConfirmed, watches } = yield* setUp
      yield* waitConfirmed("s1", "a", "b")
      watches.done("s1", "b")
      hints.length = 0
      const before = watches.sent()
      watches.reconnected()
      expect(hints).toEqual([released("a")])
      watches.refused("s2", "a", before)
      expect(hints).toEqual([released("a"), released("a")])
    }))
  it.scoped("a session's channel is subscribed when it opens (opened resolves on the confirmation) and unsubscribed once when it ends", () =>
    Effect.gen(function*() {
      const { log, settleSession, watches } = yield* setUp
      let resolved = false
      const opened = watches.opened("s1").then(() => {
        resolved = true
      })
      expect(log).toEqual(["SUBSCRIBE session:{s1}"])
      yield* Effect.promise(() => new Promise((resolve) => setImmediate(resolve)))
      expect(resolved).toBe(false)
      yield* settleSession("s1")
      yield* Effect.promise(() => opened)
      expect(resolved).toBe(true)
      watches.ended("s1")
      watches.ended("s1")
      expect(log).toEqual(["SUBSCRIBE session:{s1}", "UNSUBSCRIBE session:{s1}"])
    }))

  it.scoped("a subscriber that is down: opened resolves at once, the SUBSCRIBE is still sent", () =>
    Effect.gen(function*() {
      const { log, subscriber, watches } = yield* setUp
      subscriber.up = false
      yield* Effect.promise(() => watches.opened("s1"))
      expect(log).toEqual(["SUBSCRIBE session:{s1}"])
    }))

  it.scoped("a refusal of an acquire sent before the session's channel was confirmed is hinted: by the confirmation, or at once", () =>
    Effect.gen(function*() {
      const { hints, settleSession, waitConfirmed, watches } = yield* setUp
      // The lease's channel is long confirmed: any hint below comes from the session's channel.
      yield* waitConfirmed("s0", "a")
      hints.length = 0
      // Refused while the session's SUBSCRIBE is in flight: its confirmation hints.
      void watches.opened("s1")
      watches.refused("s1", "a", watches.sent())
      expect(hints).toEqual([])
      yield* settleSession("s1")
      expect(hints).toEqual([released("a")])
      // Sent before the confirmation, refused after it: hinted at once.
      void watches.opened("s2")
      const early = watches.sent()
      yield* settleSession("s2")
      expect(hints).toEqual([released("a")])
      watches.refused("s2", "a", early)
      expect(hints).toEqual([released("a"), released("a")])
      // Sent after the confirmation: nothing could be missed.
      watches.refused("s2", "a", watches.sent())
      expect(hints).toEqual([released("a"), released("a")])
    }))
})
