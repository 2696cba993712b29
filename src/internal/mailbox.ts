/**
 * The loop's input: an array and the loop fiber's wake-up. A `Queue` makes a `Deferred` each time
 * its taker waits, which here is once per event; this makes nothing but the wait itself.
 * Offering never waits (unbounded) and takes effect at once; one fiber takes.
 */
import * as Effect from "effect/Effect"

export interface Mailbox<A> {
  readonly items: Array<A | undefined>
  /** The index of the oldest item not taken. */
  head: number
  /** Resumes the taker, waiting for an item. */
  wake: ((resumed: Effect.Effect<void>) => void) | undefined
}

export const make = <A>(): Mailbox<A> => ({ items: [], head: 0, wake: undefined })

export const offer = <A>(box: Mailbox<A>, item: A): void => {
  box.items.push(item)
  const wake = box.wake
  if (wake !== undefined) {
    box.wake = undefined
    wake(Effect.void)
  }
}

/** How many items wait. */
export const size = <A>(box: Mailbox<A>): number => box.items.length - box.head

const poll = <A>(box: Mailbox<A>): A => {
  const item = box.items[box.head] as A
  box.items[box.head] = undefined
  box.head++
  if (box.head === box.items.length) {
    box.items.length = 0
    box.head = 0
  } else if (box.head >= 1024 && box.head * 2 >= box.items.length) {
    // A long backlog: drop the taken half rather than shifting on every take.
    box.items.splice(0, box.head)
    box.head = 0
  }
  return item
}

/**
 * Waits until an item is there. The check is made again inside the registration, which runs in one
 * go: the runtime may make the taker yield between `take`'s first look and this registration, and
 * an item offered then finds no wake-up to call (the loop would sleep on a full mailbox until the
 * next offer, which under `TestClock` may never come: a TCK run hung on it).
 */
export const waitForItem = <A>(box: Mailbox<A>): Effect.Effect<void> =>
  Effect.async<void>((resume) => {
    if (size(box) > 0) resume(Effect.void)
    else box.wake = resume
  })

/** The oldest item, waiting for one if there is none. */
export const take = <A>(box: Mailbox<A>): Effect.Effect<A> =>
  Effect.suspend(() => size(box) > 0 ? Effect.succeed(poll(box)) : Effect.zipRight(waitForItem(box), take(box)))
