/** Starting and stopping a handle (an election or a lock) on the engine, with its hooks. */
import * as Effect from "effect/Effect"
import * as Scope from "effect/Scope"
import type * as Engine from "../Engine.js"
import { ElectionAlreadyStartedError, SimbaClosedError } from "../Errors.js"
import * as LeaseName from "../LeaseName.js"
import type { ElectionError } from "../Simba.js"
import { request } from "./completions.js"
import type { Hooks, Shell } from "./shell.js"

/** Fails a start (or join) the engine refused. */
export const failStart = (name: string, outcome: Engine.Outcome): Effect.Effect<void, ElectionError> => {
  switch (outcome._tag) {
    case "Ok":
    case "NotAcquired": // only a try-lock's own completion answers this
    case "Conflict": // only a lock's refusal completion answers this
      return Effect.void
    case "AlreadyStarted":
      return Effect.fail(new ElectionAlreadyStartedError({ lease: name }))
    case "Closed":
      return Effect.fail(new SimbaClosedError())
  }
}

/** Ends the handle (awaiting the handover) and forgets its hooks. Built when run, as every stop is. */
export const stop = (shell: Shell, handle: number): Effect.Effect<void> =>
  request(shell, (completion) => ({ _tag: "Stop", handle, completion })).pipe(
    Effect.zipRight(Effect.sync(() => shell.hooks.delete(handle))),
    Effect.asVoid
  )

/**
 * Registers hooks, starts the election and stops it (awaiting the handover) when the scope closes;
 * returns the handle. (Locks make their own request: `locks.ts`.)
 */
export const start = (
  shell: Shell,
  name: string,
  hasWork: boolean,
  hooks: Hooks
): Effect.Effect<number, ElectionError, Scope.Scope> =>
  Effect.gen(function*() {
    yield* LeaseName.validate(name)
    const handle = shell.nextId++
    shell.hooks.set(handle, hooks)
    // As `acquireRelease` (the start cannot be interrupted halfway, and the stop is registered with
    // it), but a plain scope finalizer: the stop needs none of the caller's fiber refs, and restoring
    // them (two diffs and two patches of every fiber ref) cost more than the stop itself. The
    // finalizer builds the stop when the scope closes: a long-lived handle keeps one closure.
    yield* Effect.uninterruptible(Effect.flatMap(Effect.scope, (scope) =>
      request(shell, (completion) => ({ _tag: "Start", handle, name, kind: "election", hasWork, completion }))
        .pipe(
        Effect.flatMap((outcome) => failStart(name, outcome)),
        Effect.tapError(() => Effect.sync(() => shell.hooks.delete(handle))),
        Effect.zipRight(Scope.addFinalizerExit(scope, () => stop(shell, handle)))
      )))
    return handle
  })
