/**
 * A term on its own (TestClock): validity from the deadline cell, and its end from the `Revocation`
 * cell the shell sets: `revoked` waiters resumed once, an interrupted waiter forgotten, the first
 * reason kept; `Term.make` (a `Deferred`) behaves the same.
 */
import { describe, expect, it } from "@effect/vitest"
import { Deferred, Duration, Effect, Exit, Fiber, Option, TestClock } from "effect"
import * as Term from "../../src/Term.js"
import { settle } from "./helpers.js"

describe("term", () => {
  it.effect("validity follows the session's deadline cell; revocation ends it at once and for good", () =>
    Effect.gen(function*() {
      const deadline = { deadline: 1_000 }
      const revocation = Term.revocation()
      const term = Term.makeLive("orders", 7n, "s1", deadline, revocation)
      expect([term.name, term.token, term.sessionId]).toEqual(["orders", 7n, "s1"])
      expect(yield* term.isValid).toBe(true)
      expect(Duration.toMillis(yield* term.remaining)).toBe(1_000)
      yield* TestClock.adjust("600 millis")
      expect(Duration.toMillis(yield* term.remaining)).toBe(400)
      expect(Exit.isFailure(yield* Effect.exit(term.ensureValid("500 millis")))).toBe(true)
      // A renewal moves the cell's deadline: the same term reads it.
      deadline.deadline = 3_000
      yield* term.ensureValid("500 millis")
      expect(yield* term.revokedReason).toEqual(Option.none())
      Term.revoke(revocation, "STEPPED_DOWN")
      Term.revoke(revocation, "TAKEN_OVER") // the first reason stays
      expect(yield* term.isValid).toBe(false)
      expect(Duration.toMillis(yield* term.remaining)).toBe(0)
      expect(yield* term.revokedReason).toEqual(Option.some("STEPPED_DOWN"))
      expect(yield* term.revoked).toBe("STEPPED_DOWN")
      // Unbound, as callers pass it around.
      const { ensureValid } = term
      const error = yield* Effect.flip(ensureValid())
      expect(error._tag).toBe("TermExpiredError")
    }))

  it.effect("revoked resumes every waiter once; an interrupted waiter is forgotten", () =>
    Effect.gen(function*() {
      const revocation = Term.revocation()
      const term = Term.makeLive("x", 1n, "s", { deadline: Number.POSITIVE_INFINITY }, revocation)
      const first = yield* Effect.fork(term.revoked)
      const second = yield* Effect.fork(term.revoked)
      const gone = yield* Effect.fork(term.revoked)
      yield* settle
      expect(revocation.waiters).toHaveLength(3)
      yield* Fiber.interrupt(gone)
      expect(revocation.waiters).toHaveLength(2)
      Term.revoke(revocation, "DEADLINE_PASSED")
      expect(revocation.waiters).toBeUndefined()
      expect(yield* Fiber.join(first)).toBe("DEADLINE_PASSED")
      expect(yield* Fiber.join(second)).toBe("DEADLINE_PASSED")
    }))

  it.effect("Term.make reads an Effect deadline and a Deferred end the same way", () =>
    Effect.gen(function*() {
      const revoked = yield* Deferred.make<Term.RevokeReason>()
      const term = Term.make({ name: "x", token: 2n, sessionId: "s", deadline: Effect.succeed(500), revoked })
      expect(Duration.toMillis(yield* term.remaining)).toBe(500)
      expect(yield* term.revokedReason).toEqual(Option.none())
      const waiting = yield* Effect.fork(term.revoked)
      yield* Deferred.succeed(revoked, "STOPPED")
      expect(yield* Fiber.join(waiting)).toBe("STOPPED")
      expect(yield* term.revokedReason).toEqual(Option.some("STOPPED"))
      expect(yield* term.isValid).toBe(false)
    }))
})
