/**
 * The loop's mailbox never loses a wake-up. Found by a TCK run that hung under `TestClock` (1 run in
 * 4 under load): the loop looked for an item, the runtime made it yield before it registered its
 * wake-up, an item offered in between found no wake-up to call, and the loop slept on a non-empty
 * mailbox until the next offer, which under `TestClock` never came.
 */
import { describe, expect, it } from "@effect/vitest"
import * as Effect from "effect/Effect"
import * as Fiber from "effect/Fiber"
import * as Mailbox from "../../src/internal/mailbox.js"

/** One item, as the loop takes them: what is there, else after the wait for it. */
const take = <A>(box: Mailbox.Mailbox<A>): Effect.Effect<A> =>
  Effect.suspend(() =>
    Mailbox.size(box) > 0
      ? Effect.succeed(Mailbox.poll(box))
      : Effect.zipRight(Mailbox.waitForItem(box), Effect.sync(() => Mailbox.poll(box)))
  )

describe("mailbox", () => {
  it.live("a wait that starts with an item already there ends at once (the yield-before-register race)", () =>
    Effect.gen(function*() {
      const box = Mailbox.make<string>()
      // What an offer in the gap leaves: the item is in, and nobody was there to wake.
      Mailbox.offer(box, "offered in the gap")
      const waited = yield* Mailbox.waitForItem(box).pipe(Effect.timeout("2 seconds"), Effect.either)
      expect(waited._tag).toBe("Right")
      expect(yield* take(box)).toBe("offered in the gap")
    }))

  it.live("a taker sees every item in order, offered before or while it waits", () =>
    Effect.gen(function*() {
      const box = Mailbox.make<number>()
      const count = 2_000
      const taker = yield* Effect.fork(Effect.forEach(Array.from({ length: count }), () => take(box)))
      yield* Effect.forEach(Array.from({ length: count }, (_, i) => i), (i) =>
        i % 3 === 0 ? Effect.zipRight(Effect.yieldNow(), Effect.sync(() => Mailbox.offer(box, i))) : Effect.sync(() => Mailbox.offer(box, i)))
      const taken = yield* Fiber.join(taker).pipe(Effect.timeout("5 seconds"))
      expect(taken).toEqual(Array.from({ length: count }, (_, i) => i))
    }))
})
