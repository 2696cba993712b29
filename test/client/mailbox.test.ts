/**
 * The loop's mailbox never loses a wake-up, and an offer made while the taker waits is taken in the
 * offerer's call, by one run at a time, with what that run leaves to the taker fiber.
 *
 * The first case: Found by a TCK run that hung under `TestClock` (1 run in
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

  /** A taker as the loop is: `takeNow` takes everything (each item through `handle`), the fiber runs what it leaves. */
  const taker = <A>(box: Mailbox.Mailbox<A>, handle: (item: A) => Effect.Effect<void> | undefined) => {
    const takeNow = (): Effect.Effect<void> | undefined => {
      while (Mailbox.size(box) > 0) {
        const pending = handle(Mailbox.poll(box))
        if (pending !== undefined) return pending
      }
      return undefined
    }
    Mailbox.setTaker(box, takeNow)
    const turn = Effect.suspend(() => takeNow() ?? Mailbox.waitForItem(box))
    return Effect.fork(Effect.forever(turn))
  }

  /** A new mailbox and its taker fiber, once that fiber has started and waits for an item. */
  const parkedTaker = <A>(handle: (item: A) => Effect.Effect<void> | undefined) =>
    Effect.gen(function*() {
      const box = Mailbox.make<A>()
      const fiber = yield* taker(box, handle)
      yield* Effect.sleep("10 millis")
      return { box, fiber }
    })

  it.live("an offer while the taker waits is taken in the offerer's call; one made during that run is taken by it", () =>
    Effect.gen(function*() {
      const taken: Array<string> = []
      const { box, fiber } = yield* parkedTaker((item: string) => {
        taken.push(item)
        // Offered by the handling itself (a backend answering at once): the same run takes it, after.
        if (item === "first") Mailbox.offer(box, "nested")
        return undefined
      })
      expect(box.wake).toBeDefined()
      Mailbox.offer(box, "first")
      // Nothing yielded since the offer: both were taken in it, and the taker still waits.
      expect(taken).toEqual(["first", "nested"])
      expect(box.wake).toBeDefined()
      expect(Mailbox.size(box)).toBe(0)
      yield* Fiber.interrupt(fiber)
    }))

  it.live("what a run leaves is run by the taker fiber before the next item; offers meanwhile only queue", () =>
    Effect.gen(function*() {
      const log: Array<string> = []
      const { box, fiber } = yield* parkedTaker((item: string) => {
        log.push(`take ${item}`)
        return item === "needs an effect"
          ? Effect.zipRight(Effect.sleep("20 millis"), Effect.sync(() => log.push("its effect ran")))
          : undefined
      })
      Mailbox.offer(box, "needs an effect")
      // The taker fiber is running the effect: this offer is not taken in the call.
      Mailbox.offer(box, "next")
      expect(log).toEqual(["take needs an effect"])
      yield* Effect.sleep("100 millis")
      expect(log).toEqual(["take needs an effect", "its effect ran", "take next"])
      yield* Fiber.interrupt(fiber)
    }))

  it.live("a taker interrupted while it waits is not taken for by a later offer", () =>
    Effect.gen(function*() {
      const taken: Array<string> = []
      const { box, fiber } = yield* parkedTaker((item: string) => {
        taken.push(item)
        return undefined
      })
      yield* Fiber.interrupt(fiber)
      expect(box.wake).toBeUndefined()
      Mailbox.offer(box, "after the taker ended")
      expect(taken).toEqual([])
      expect(Mailbox.size(box)).toBe(1)
    }))

  it.live("a defect in a run made by an offer ends the taker fiber with it, not the offerer", () =>
    Effect.gen(function*() {
      const { box, fiber } = yield* parkedTaker((_: string) => {
        throw new Error("engine bug")
      })
      Mailbox.offer(box, "boom")
      const exit = yield* Fiber.await(fiber).pipe(Effect.timeout("2 seconds"))
      expect(exit._tag).toBe("Failure")
      expect(String(exit._tag === "Failure" ? exit.cause : "")).toContain("engine bug")
    }))
})
