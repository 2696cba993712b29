/**
 * The loop fiber: takes the queued inputs, runs `Engine.step` on each with `now` from the clock, and
 * performs the commands in order. One taker at a time sets the engine state: this fiber, or, while it
 * waits for an input, the call that offers one (`takeNow`, see `Mailbox.offer`).
 *
 * Most commands are done synchronously (a backend call started, a deadline cell, a completion, an
 * event published with no log line to write, a timer cancelled, a lock's grant): only the ones that
 * run a hook's Effect, start the timers' sleeper or write a log line are Effects, and the rest of a
 * step's commands are chained after them, so the order is kept at the cost of one Effect per command
 * that needs one (a step of an uncontended lock has none).
 */
import * as Chunk from "effect/Chunk"
import * as Effect from "effect/Effect"
import * as FiberRef from "effect/FiberRef"
import * as Runtime from "effect/Runtime"
import * as Stream from "effect/Stream"
import * as Engine from "../Engine.js"
import * as LeaseBackend from "../LeaseBackend.js"
import * as BackendCalls from "./backendCalls.js"
import * as Completions from "./completions.js"
import * as Logs from "./logs.js"
import * as Mailbox from "./mailbox.js"
import * as SessionDeadline from "./sessionDeadline.js"
import { type LoopFiber, type LoopInput, offerNow, type Shell } from "./shell.js"
import * as Terms from "./terms.js"
import * as Timers from "./timers.js"

/** Performs `command` at once if it needs no Effect; else returns the Effect that performs it. */
const perform = (shell: Shell, command: Engine.Command, now: number, loop: LoopFiber): Effect.Effect<void> | undefined => {
  switch (command._tag) {
    case "Call":
      return BackendCalls.perform(shell, command, now, loop)
    case "Arm":
      return Timers.arm(shell.timers, command.key, command.id, command.at, loop.id)
    case "Disarm":
      Timers.cancel(shell.timers, command.key)
      return undefined
    case "Deadline":
      SessionDeadline.set(shell.deadline, command.sessionSeq, command.deadline)
      return undefined
    case "Elected":
      return Terms.onElected(shell, command, loop)
    case "Revoked":
      return Terms.onRevoked(shell, command, loop)
    case "Complete":
      Completions.complete(shell, command.completion, command.outcome)
      return undefined
    case "Publish": {
      // Every lifecycle log line comes from here (docs/operations.md, "Logs"); most events write none.
      const log = Logs.log(shell, command.event, command.kind)
      if (log === undefined) {
        shell.pubsub.unsafeOffer(command.event)
        return undefined
      }
      return Effect.zipRight(log, Effect.sync(() => shell.pubsub.unsafeOffer(command.event)))
    }
    case "Members":
      // The group view lives in the engine state, where `snapshot` reads it.
      return undefined
  }
}

/** Performs `commands` from `index` on, in order; returns what is left to run, if anything. */
const performFrom = (
  shell: Shell,
  commands: ReadonlyArray<Engine.Command>,
  index: number,
  now: number,
  loop: LoopFiber
): Effect.Effect<void> | undefined => {
  for (let i = index; i < commands.length; i++) {
    const pending = perform(shell, commands[i]!, now, loop)
    if (pending !== undefined) {
      return i + 1 === commands.length
        ? pending
        : Effect.zipRight(pending, Effect.suspend(() => performFrom(shell, commands, i + 1, now, loop) ?? Effect.void))
    }
  }
  return undefined
}

/**
 * Runs one input: a step of the engine and the commands it can do at once, or a task that must see
 * no step half-done. Returns what must run before the next input, if anything.
 */
const handle = (shell: Shell, input: LoopInput, loop: LoopFiber): Effect.Effect<void> | undefined => {
  if (input._tag === "Task") return input.run
  // Milliseconds on the monotonic clock, as `Term.monotonicMillis`.
  const now = Number(loop.clock.unsafeCurrentTimeNanos()) / 1_000_000
  const previous = shell.state
  const [next, commands] = Engine.step(previous, input, now)
  shell.state = next
  Engine.supersede(previous, next)
  return performFrom(shell, commands, 0, now, loop)
}

/**
 * Handles the queued inputs in order, in one go, until one leaves an Effect to run, the mailbox is
 * empty, or the event loop must turn (`Mailbox.mustYield`); returns that Effect or the turn
 * (`undefined`: the mailbox is empty). Most inputs of a lock leave nothing to run, so a burst of them
 * costs the runtime one operation rather than a dozen each. Runs in the loop fiber, or in the call
 * of an offer while the loop fiber waits for an input (`Mailbox.offer`): either way the only one
 * running, and what it leaves to run is run by the loop fiber before the next input.
 */
const takeNow = (shell: Shell, loop: LoopFiber): Effect.Effect<void> | undefined => {
  const box = shell.events
  for (;;) {
    if (Mailbox.size(box) === 0) return undefined
    if (Mailbox.mustYield(box)) return Mailbox.nextTurn
    const pending = handle(shell, Mailbox.poll(box), loop)
    if (pending !== undefined) return pending
  }
}

/** The loop fiber's turn: what `takeNow` leaves, or the wait for the next input. */
const drain = (shell: Shell, loop: LoopFiber): Effect.Effect<void> =>
  takeNow(shell, loop) ?? Mailbox.waitForItem(shell.events)

/** The loop, forever. */
export const run = (shell: Shell): Effect.Effect<never> =>
  Effect.flatMap(
    Effect.all([Effect.fiberId, FiberRef.get(FiberRef.currentMetricLabels), Effect.clock, Effect.runtime<never>(), Effect.tracer]),
    ([id, metricLabels, clock, runtime, tracer]) => {
      const loop: LoopFiber = {
        id,
        metricLabels,
        clock,
        fork: Runtime.runFork(runtime),
        direct: LeaseBackend.directOf(shell.backend, tracer)
      }
      Mailbox.setTaker(shell.events, () => takeNow(shell, loop))
      // Not `Effect.forever`, which yields to the scheduler after every event.
      return Effect.whileLoop({
        while: () => true,
        body: () => Effect.suspend(() => drain(shell, loop)),
        step: () => undefined
      }).pipe(Effect.zipRight(Effect.never))
    }
  )

/**
 * Queues the backend's hints the engine has a use for, forever: in the backend's own callback when
 * it offers one (`LeaseBackend.listenerOf`), else from its stream.
 */
export const forwardHints = (shell: Shell): Effect.Effect<void> => {
  const forward = (hint: Engine.HintEvent): void => {
    if (Engine.wantsHint(shell.state, hint)) offerNow(shell, { _tag: "Hint", hint })
  }
  const listen = LeaseBackend.listenerOf(shell.backend.hints)
  if (listen !== undefined) return Effect.scoped(Effect.zipRight(listen(forward), Effect.never))
  return shell.backend.hints.pipe(
    Stream.runForEachChunk((hints) => Effect.sync(() => Chunk.forEach(hints, forward)))
  )
}
