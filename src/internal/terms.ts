/**
 * Terms as the shell delivers them: `Elected` makes a `Term` (reading its session incarnation's
 * deadline cell), runs the handle's hook and the term's work; `Revoked` completes the term's
 * `revoked`, interrupts its work without waiting for it, and runs the hook.
 */
import * as Cause from "effect/Cause"
import * as Clock from "effect/Clock"
import * as Effect from "effect/Effect"
import * as Exit from "effect/Exit"
import * as Option from "effect/Option"
import type * as Engine from "../Engine.js"
import * as LeaseName from "../LeaseName.js"
import * as Term from "../Term.js"
import { interruptSignalNow } from "./interrupt.js"
import * as Metrics from "./metrics.js"
import * as SessionDeadline from "./sessionDeadline.js"
import { type Hooks, type LiveTerm, type LoopFiber, offerNow, type Shell } from "./shell.js"

export const onElected = (
  shell: Shell,
  command: Extract<Engine.Command, { _tag: "Elected" }>,
  loop: LoopFiber
): Effect.Effect<void> | undefined => {
  const revoked = Term.revocation()
  const cell = SessionDeadline.cellOf(shell.deadline, command.sessionSeq)
  const term = Term.makeLive(LeaseName.poolOf(command.name), command.token, command.sessionId, cell, revoked)
  const live: LiveTerm = { term, revoked, work: undefined, handle: command.handle, group: command.group }
  shell.terms.set(command.termId, live)
  const metrics = Metrics.forLease(LeaseName.poolOf(command.name), command.group)
  metrics.termsWon.unsafeUpdate(1, loop.metricLabels)
  metrics.leaderTerms.unsafeModify(1, loop.metricLabels)
  const hook = command.group === undefined ? shell.hooks.get(command.handle) : shell.groupHooks.get(command.group)
  const elected = hook?.onElected(term, command.partition)
  if (hook === undefined || elected === undefined) {
    // The engine waits for the work it was told of; for a term without work it waits for nothing.
    if (command.hasWork) workExited(shell, command, undefined)
    return undefined
  }
  return Effect.flatMap(elected, (work) => {
    if (Option.isSome(work)) return runWork(shell, command, live, hook, work.value)
    return command.hasWork ? Effect.sync(() => workExited(shell, command, undefined)) : Effect.void
  })
}

/** Tells the engine the term's work exited (`stepDown`: the cooldown after a failure of its own). */
const workExited = (shell: Shell, command: Extract<Engine.Command, { _tag: "Elected" }>, stepDown: number | undefined) =>
  offerNow(shell, { _tag: "WorkExited", handle: command.handle, termId: command.termId, stepDown })

/** Runs a term's work in a fiber of its own, which tells the engine when it exits. */
const runWork = (
  shell: Shell,
  command: Extract<Engine.Command, { _tag: "Elected" }>,
  live: LiveTerm,
  hook: Hooks,
  work: Effect.Effect<unknown, unknown>
): Effect.Effect<void> =>
  Effect.gen(function*() {
    const startedAt = yield* Clock.currentTimeMillis
    // The fiber's result: the cooldown for which the engine gives the term up when the work failed
    // on its own, else `undefined`.
    const failed = (cause: Cause.Cause<unknown>) =>
      Effect.gen(function*() {
        // Failing because the term was revoked (e.g. `ensureValid`) is not the work's failure.
        if (Cause.isInterruptedOnly(cause) || live.revoked.reason !== undefined) return undefined
        const ranFor = (yield* Clock.currentTimeMillis) - startedAt
        const cooldown = hook.onWorkFailed?.(command.partition, ranFor)
        yield* Effect.logError(
          cooldown === undefined
            ? `leader work for ${command.name} failed`
            : `leader work for ${command.name} failed; giving the lease up, competing again in ${cooldown} ms`,
          cause
        )
        return cooldown
      })
    const fiber = yield* work.pipe(
      Effect.as(undefined),
      Effect.catchAllCause(failed),
      // Not in the client's scope: closing must not wait for work that ignores interruption
      // longer than the handover allows (the engine bounds it by the deadline). Every term is
      // revoked, and so its work interrupted, before the client closes.
      Effect.forkDaemon
    )
    // An observer, not `ensuring`: a fiber interrupted before its first step (revoked in the same
    // turn as elected) never runs its `ensuring`, and the engine would wait out the handover deadline.
    fiber.addObserver((exit) => workExited(shell, command, Exit.isSuccess(exit) ? exit.value : undefined))
    live.work = fiber
  })

export const onRevoked = (
  shell: Shell,
  command: Extract<Engine.Command, { _tag: "Revoked" }>,
  loop: LoopFiber
): Effect.Effect<void> | undefined => {
  const live = shell.terms.get(command.termId)
  if (live === undefined) return undefined
  shell.terms.delete(command.termId)
  Term.revoke(live.revoked, command.reason)
  const metrics = Metrics.forLease(LeaseName.poolOf(command.name), live.group)
  metrics.revocations[command.reason].unsafeUpdate(1, loop.metricLabels)
  metrics.leaderTerms.unsafeModify(-1, loop.metricLabels)
  // The engine never waits for the work: it is asked to stop, not awaited.
  if (live.work !== undefined) interruptSignalNow(live.work, loop.id)
  const hook = live.group === undefined ? shell.hooks.get(live.handle) : shell.groupHooks.get(live.group)
  return hook?.onRevoked(live.term, command.reason)
}
