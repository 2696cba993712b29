/**
 * Assertions on the SPI's replies and a recorder of a backend's hints, shared by the backends' own
 * tests (the TCK has its own in `test/tck`).
 */
import { expect } from "@effect/vitest"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Schedule from "effect/Schedule"
import * as Stream from "effect/Stream"
import * as SubscriptionRef from "effect/SubscriptionRef"
import { type AcquireReply, type Hint, type KeepAliveReply, LeaseBackend } from "../../src/LeaseBackend.js"

/** The token of a `Granted` reply; fails the test on any other. */
export const granted = (reply: AcquireReply): bigint => {
  if (reply._tag !== "Granted") expect.fail(`expected Granted, got ${reply._tag}`)
  return reply.token
}

/** A `HeldBy` reply; fails the test on any other. */
export const heldBy = (reply: AcquireReply) => {
  if (reply._tag !== "HeldBy") expect.fail(`expected HeldBy, got ${reply._tag}`)
  return reply
}

/** A `Live` renewal reply; fails the test on any other. */
export const live = (reply: KeepAliveReply) => {
  if (reply._tag !== "Live") expect.fail(`expected Live, got ${reply._tag}`)
  return reply
}

/** The backend's hints from now on (`seen`), and a wait (at most `within`) for one that matches. */
export const heardHints = Effect.gen(function*() {
  const b = yield* LeaseBackend
  const received = yield* SubscriptionRef.make<ReadonlyArray<Hint>>([])
  yield* b.hints.pipe(
    Stream.runForEach((hint) => SubscriptionRef.update(received, (hints) => [...hints, hint])),
    Effect.forkScoped
  )
  const waitFor = (predicate: (hint: Hint) => boolean, within: Duration.DurationInput = "5 seconds") =>
    received.changes.pipe(
      Stream.filter((hints) => hints.some(predicate)),
      Stream.take(1),
      Stream.runDrain,
      Effect.timeoutFail({ duration: within, onTimeout: () => new Error("hint not received") })
    )
  return { seen: SubscriptionRef.get(received), waitFor }
})

/**
 * Returns once the backend's hints reach `waitFor` (a `LISTEN` connection may take a round trip to
 * be up): a session holding `name(attempt)` closes, which PostgreSQL notifies (`r:<name>`), until
 * that comes back as a `Released` hint.
 */
export const hintsFlow = (
  waitFor: (predicate: (hint: Hint) => boolean, within?: Duration.DurationInput) => Effect.Effect<void, Error>,
  name: () => string,
  ttl: Duration.Duration
) =>
  Effect.gen(function*() {
    const b = yield* LeaseBackend
    const probe = name()
    const sid = (yield* b.openSession(ttl)).sessionId
    granted(yield* b.acquire(sid, probe))
    yield* b.closeSession(sid)
    yield* waitFor((hint) => hint._tag === "Released" && hint.name === probe, "300 millis")
  }).pipe(Effect.retry(Schedule.recurs(20)))
