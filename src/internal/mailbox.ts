/**
 * The loop's input: an array and the loop fiber's wake-up. A `Queue` makes a `Deferred` each time
 * its taker waits, which here is once per event; this makes nothing but the wait itself.
 * Offering never waits (unbounded) and takes effect at once; one fiber takes: it polls what is
 * there, waits with `waitForItem` when nothing is, and asks `mustYield` before each item (`loop.ts`).
 *
 * While the taker waits, an offer takes the items itself, in the offerer's call (`takeNow`, which
 * the taker installs): the taker's synchronous part runs there instead of after two hops of the
 * scheduler (the taker's wake-up, then the offerer's resumption). It is still one taker: the taker
 * fiber is parked for as long as `wake` is set, only one `takeNow` runs at a time (an offer made
 * during it is taken by that run), and whatever `takeNow` leaves to run as an Effect wakes the
 * taker fiber, which runs it before anything else is taken.
 */
import * as Effect from "effect/Effect"

export interface Mailbox<A> {
  readonly items: Array<A | undefined>
  /** The index of the oldest item not taken. */
  head: number
  /** Resumes the taker, waiting for an item. */
  wake: ((resumed: Effect.Effect<void>) => void) | undefined
  /** Items taken since the last look at `turnPending` (see `take`). */
  takenSinceLook: number
  /** A `setImmediate` is waiting to clear this: no event-loop turn happened since it was set. */
  turnPending: boolean
  /**
   * Takes what is queued, as the taker would, and returns the Effect the taker fiber must run next
   * (`undefined`: nothing, it may go on waiting). Installed by the taker (`setTaker`).
   */
  takeNow: (() => Effect.Effect<void> | undefined) | undefined
  /** A `takeNow` is running (an offer made meanwhile only queues: that run takes it). */
  taking: boolean
}

export const make = <A>(): Mailbox<A> => ({
  items: [],
  head: 0,
  wake: undefined,
  takenSinceLook: 0,
  turnPending: false,
  takeNow: undefined,
  taking: false
})

/** Installs the taker's synchronous part (see the module's comment). */
export const setTaker = <A>(box: Mailbox<A>, takeNow: () => Effect.Effect<void> | undefined): void => {
  box.takeNow = takeNow
}

/**
 * How many items the taker takes between two looks at whether the event loop turned meanwhile. The
 * taker and the fibers it answers resume each other through microtasks: closing 10,000 locks (a stop
 * each, each awaited before the next) was one chain of 3.5 s in which no timer fired and no socket
 * was read, so the session's renewals starved. One `setImmediate` per this many items is the cost.
 */
export const itemsPerLook = 64

export const offer = <A>(box: Mailbox<A>, item: A): void => {
  box.items.push(item)
  const wake = box.wake
  if (wake === undefined || box.taking) return
  const takeNow = box.takeNow
  if (takeNow === undefined) {
    box.wake = undefined
    wake(Effect.void)
    return
  }
  let next: Effect.Effect<void> | undefined
  box.taking = true
  try {
    next = takeNow()
  } catch (defect) {
    // As it would in the taker fiber: the taker dies of it.
    next = Effect.die(defect)
  } finally {
    box.taking = false
  }
  if (next === undefined) return
  box.wake = undefined
  wake(next)
}

/** How many items wait. */
export const size = <A>(box: Mailbox<A>): number => box.items.length - box.head

/** Takes the oldest item (there must be one). */
export const poll = <A>(box: Mailbox<A>): A => {
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
    if (size(box) > 0) return resume(Effect.void)
    box.wake = resume
    // An interrupted taker (its client closed) must not be taken for by an offer.
    return Effect.sync(() => {
      if (box.wake === resume) box.wake = undefined
    })
  })

/** Resumes after an event-loop turn (timers and I/O run meanwhile), not through a microtask. */
export const nextTurn: Effect.Effect<void> = Effect.async<void>((resume) => {
  const immediate = setImmediate(() => resume(Effect.void))
  return Effect.sync(() => clearImmediate(immediate))
})

/**
 * Every `itemsPerLook` items: if the `setImmediate` set at the last look has not run, the event loop
 * has not turned for that many items (one chain of microtasks), and the taker yields to it first.
 */
export const mustYield = <A>(box: Mailbox<A>): boolean => {
  if (++box.takenSinceLook < itemsPerLook) return false
  box.takenSinceLook = 0
  if (box.turnPending) return true
  box.turnPending = true
  setImmediate(() => {
    box.turnPending = false
  })
  return false
}
