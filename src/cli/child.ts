/**
 * The command `simba lock` and `simba elect` run: a child process in a process group of its own, so
 * a lost term stops the command and everything it started (`kill(-pgid)`), not only its first process.
 */
import * as Data from "effect/Data"
import * as Deferred from "effect/Deferred"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import type * as Scope from "effect/Scope"
import { spawn } from "node:child_process"
import { constants } from "node:os"

/** The command could not be started (not found, not executable). */
export class SpawnError extends Data.TaggedError("SpawnError")<{
  readonly command: string
  readonly code: string | undefined
  readonly cause: unknown
}> {
  override get message() {
    const reason = this.cause instanceof Error ? this.cause.message : String(this.cause)
    return `cannot run ${JSON.stringify(this.command)}: ${reason}`
  }
}

/** A running command. */
export interface Child {
  readonly pid: number
  /**
   * Its exit status, once it exited: its own code, or 128 + the signal's number when a signal ended
   * it (as a shell reports it).
   */
  readonly exited: Effect.Effect<number>
  /** Whether it is still running. */
  readonly running: Effect.Effect<boolean>
  /** Sends `signal` to its whole process group; nothing once it exited. */
  readonly signal: (signal: NodeJS.Signals) => Effect.Effect<void>
  /**
   * Stops it: SIGTERM to its group at once, SIGKILL to the group after `grace` if its first process
   * has not exited by then; completes with its status once it exited.
   */
  readonly stop: (grace: Duration.Duration) => Effect.Effect<number>
  /** Waits up to `grace` for it to exit (a signal was sent already), then SIGKILL to the group. */
  readonly awaitOrKill: (grace: Duration.Duration) => Effect.Effect<number>
}

/** The status a shell reports for a process ended by `signal`. */
export const statusOfSignal = (signal: NodeJS.Signals): number => 128 + (constants.signals[signal] ?? 0)

/**
 * Starts `command` with `args` in a new process group, with `env` added to this process's
 * environment and this process's stdin, stdout and stderr. Fails with `SpawnError` if it cannot start.
 * When the scope closes while it still runs (the CLI itself is going down), its group is killed.
 */
export const spawnChild = (
  command: string,
  args: ReadonlyArray<string>,
  env: Readonly<Record<string, string>>
): Effect.Effect<Child, SpawnError, Scope.Scope> =>
  Effect.acquireRelease(
    Effect.flatMap(Deferred.make<number>(), (exit) =>
      Effect.async<Child, SpawnError>((resume) => {
        const process = spawn(command, args, {
          detached: true,
          stdio: "inherit",
          env: { ...globalThis.process.env, ...env }
        })
        let exited = false
        process.once("error", (cause) => {
          // An error after the start (a failed kill) is not a failure to start.
          if (process.pid === undefined) {
            const code = "code" in cause && typeof cause.code === "string" ? cause.code : undefined
            resume(Effect.fail(new SpawnError({ command, code, cause })))
          }
        })
        process.once("exit", (code, signal) => {
          exited = true
          Deferred.unsafeDone(exit, Effect.succeed(code ?? (signal === null ? 1 : statusOfSignal(signal))))
        })
        process.once("spawn", () => {
          const pid = process.pid!
          const signalGroup = (name: NodeJS.Signals) =>
            Effect.sync(() => {
              if (exited && name !== "SIGKILL") return
              try {
                globalThis.process.kill(-pid, name)
              } catch {
                // ESRCH: the group is gone already, which is what the signal was for.
              }
            })
          const awaitOrKill = (grace: Duration.Duration) =>
            // Interruptible: it runs in finalizers, where a timeout could not otherwise end the wait.
            Effect.timeout(Effect.interruptible(Deferred.await(exit)), grace).pipe(
              Effect.catchTag("TimeoutException", () => signalGroup("SIGKILL")),
              Effect.zipRight(Deferred.await(exit)),
              // Whatever of the group outlived its first process must not run on unprotected.
              Effect.tap(() => signalGroup("SIGKILL"))
            )
          const stop = (grace: Duration.Duration) => Effect.zipRight(signalGroup("SIGTERM"), awaitOrKill(grace))
          resume(Effect.succeed({
            pid,
            exited: Deferred.await(exit),
            running: Effect.map(Deferred.isDone(exit), (done) => !done),
            signal: signalGroup,
            stop,
            awaitOrKill
          }))
        })
      })),
    (child) => Effect.flatMap(child.running, (running) => running ? child.stop(Duration.zero) : Effect.void)
  )
