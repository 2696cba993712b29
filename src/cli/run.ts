/**
 * `simba lock` and `simba elect`: a command run while this process holds a lease, with the lease's
 * name and fencing token in its environment, stopped (SIGTERM to its process group, SIGKILL after
 * the grace) as soon as the term ends, and given the signals `simba` itself receives.
 */
import * as Cause from "effect/Cause"
import * as Data from "effect/Data"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Fiber from "effect/Fiber"
import * as Option from "effect/Option"
import * as Queue from "effect/Queue"
import * as Ref from "effect/Ref"
import type * as Scope from "effect/Scope"
import * as SynchronizedRef from "effect/SynchronizedRef"
import type { SimbaClient } from "../Simba.js"
import type { Term } from "../Term.js"
import { type Child, spawnChild, statusOfSignal } from "./child.js"
import { Signals } from "./signals.js"

/** The command and its arguments, as given after `--`. */
export interface CommandLine {
  readonly command: string
  readonly args: ReadonlyArray<string>
}

/** Writes one line on stderr, `simba: ` first. */
export const say = (text: string): Effect.Effect<void> => Effect.sync(() => void process.stderr.write(`simba: ${text}\n`))

/** The environment a command gets for a term. */
const termEnv = (term: Term): Record<string, string> => ({
  SIMBA_LEASE: term.name,
  SIMBA_TOKEN: term.token.toString()
})

/**
 * Where the command stands, for the signals `simba` receives: before a term there is nothing to
 * forward them to (the command in charge decides); while a child starts they wait; then they go to it.
 */
type Phase =
  | { readonly _tag: "Idle" }
  | { readonly _tag: "Starting"; readonly pending: ReadonlyArray<NodeJS.Signals> }
  | { readonly _tag: "Running"; readonly child: Child }

interface Runner {
  /**
   * Runs the command for `term` until it exits (its status). Interrupted (the term ended, or `simba`
   * is stopping): `onStop`, then the command is stopped, SIGTERM first unless a signal was forwarded
   * to it already, SIGKILL after the grace.
   */
  readonly runFor: (term: Term, onStop: Effect.Effect<void>) => Effect.Effect<number, unknown>
  /** The last signal heard, whether it went to a child or to `idle`. */
  readonly signalled: Ref.Ref<Option.Option<NodeJS.Signals>>
  /** The status of the last command that exited after a signal was forwarded to it. */
  readonly signalledExit: Ref.Ref<Option.Option<number>>
}

/**
 * Forwards every signal to the running child, or hands it to `idle` when no child runs (or
 * starts), for as long as the scope lives.
 */
const makeRunner = (
  line: CommandLine,
  grace: Duration.Duration,
  idle: (signal: NodeJS.Signals) => Effect.Effect<void>
): Effect.Effect<Runner, never, Signals | Scope.Scope> =>
  Effect.gen(function*() {
    const signals = yield* Signals
    const queue = yield* signals.subscribe
    const phase = yield* SynchronizedRef.make<Phase>({ _tag: "Idle" })
    const signalled = yield* Ref.make(Option.none<NodeJS.Signals>())
    const signalledExit = yield* Ref.make(Option.none<number>())
    const forwarded = yield* Ref.make(false)
    yield* Effect.forkScoped(Effect.forever(Effect.flatMap(Queue.take(queue), (signal) =>
      SynchronizedRef.updateEffect(phase, (now): Effect.Effect<Phase> => {
        switch (now._tag) {
          case "Idle":
            return Effect.as(Effect.zipRight(Ref.set(signalled, Option.some(signal)), idle(signal)), now)
          case "Starting":
            return Effect.succeed({ _tag: "Starting", pending: [...now.pending, signal] })
          case "Running":
            return Effect.as(
              Effect.all([Ref.set(signalled, Option.some(signal)), Ref.set(forwarded, true), now.child.signal(signal)]),
              now
            )
        }
      }))))

    const runFor = (term: Term, onStop: Effect.Effect<void>) =>
      Effect.scoped(Effect.gen(function*() {
        yield* Ref.set(forwarded, false)
        yield* SynchronizedRef.set(phase, { _tag: "Starting", pending: [] })
        yield* Effect.addFinalizer(() => SynchronizedRef.set(phase, { _tag: "Idle" }))
        const child = yield* spawnChild(line.command, line.args, termEnv(term))
        yield* SynchronizedRef.updateEffect(phase, (now) => {
          const pending = now._tag === "Starting" ? now.pending : []
          return Effect.as(
            Effect.zipRight(
              pending.length > 0 ? Ref.set(forwarded, true) : Effect.void,
              Effect.forEach(pending, child.signal, { discard: true })
            ),
            { _tag: "Running", child } as const
          )
        })
        const exited = (status: number) =>
          Effect.flatMap(Ref.get(forwarded), (sent) => sent ? Ref.set(signalledExit, Option.some(status)) : Effect.void)
        return yield* child.exited.pipe(
          Effect.tap(exited),
          // Interrupted: the term ended (or `simba` is stopping); the command must stop before the
          // lease can go to anyone else.
          Effect.onInterrupt(() =>
            Effect.flatMap(child.running, (running) =>
              running
                ? Effect.flatMap(Ref.get(forwarded), (sent) =>
                  onStop.pipe(Effect.zipRight(sent ? child.awaitOrKill(grace) : child.stop(grace)), Effect.flatMap(exited)))
                : Effect.void)
          )
        )
      }))
    return { runFor, signalled, signalledExit }
  })

/**
 * `simba lock NAME -- COMMAND`: waits for the lock (at most `timeout`), runs the command holding it,
 * releases when it exits and answers its status. A signal while waiting gives up the wait (status
 * 128 + the signal's number); a signal while the command runs is forwarded to it. The lock lost
 * while the command runs: the command is stopped, a line on stderr says why, status 76.
 */
export const lock = (options: {
  readonly client: SimbaClient
  readonly name: string
  readonly line: CommandLine
  readonly timeout: Option.Option<Duration.Duration>
  readonly grace: Duration.Duration
}): Effect.Effect<number, unknown, Signals> =>
  Effect.scoped(Effect.gen(function*() {
    const { client, grace, line, name } = options
    const waiting = yield* Ref.make(Option.none<Fiber.RuntimeFiber<number, unknown>>())
    const runner = yield* makeRunner(line, grace, () =>
      Effect.flatMap(Ref.get(waiting), Option.match({ onNone: () => Effect.void, onSome: Fiber.interruptFork })))
    const lockOptions = Option.match(options.timeout, { onNone: () => undefined, onSome: (timeout) => ({ timeout }) })
    const fiber = yield* Effect.fork(client.withLock(
      name,
      (term) => runner.runFor(term, say(`lock ${name} (token ${term.token}) lost; stopping ${line.command} (SIGTERM, SIGKILL after ${Duration.format(grace)})`)),
      lockOptions
    ))
    yield* Ref.set(waiting, Option.some(fiber))
    const exit = yield* Fiber.await(fiber)
    if (exit._tag === "Success") return exit.value
    const signalled = yield* Ref.get(runner.signalled)
    if (Option.isSome(signalled) && Cause.isInterruptedOnly(exit.cause)) {
      yield* say(`${signalled.value} while waiting for the lock ${name}; ${line.command} was not run`)
      return statusOfSignal(signalled.value)
    }
    return yield* Effect.failCause(exit.cause)
  }))

/**
 * `simba elect NAME -- COMMAND`: competes for `name`, runs the command for each term this process
 * holds, stops it when the term ends, and competes again. A command that exits on its own ends the
 * term (another process may take over; this one competes again after a backoff). A signal stops
 * the election: it is forwarded to a running command, and once that exited (SIGKILL after the
 * grace) the lease is handed over; the status is the command's, or 0 when none ran.
 */
export const elect = (options: {
  readonly client: SimbaClient
  readonly name: string
  readonly line: CommandLine
  readonly grace: Duration.Duration
}): Effect.Effect<number, unknown, Signals> =>
  Effect.scoped(Effect.gen(function*() {
    const { client, grace, line, name } = options
    const signals = yield* Signals
    const runner = yield* makeRunner(line, grace, () => Effect.void)
    // From here a signal stops the election (and the exit status is 0 when no command ran): said, so
    // an operator, or a test, can tell a competing process from one still starting.
    yield* say(`competing for ${name}`)
    const work = (term: Term) =>
      Effect.gen(function*() {
        yield* say(`leading ${name} (token ${term.token}); running ${line.command}`)
        const onStop = Effect.flatMap(Ref.get(runner.signalled), (signalled) =>
          Option.isSome(signalled)
            ? say(`${signalled.value}: waiting for ${line.command} to exit (SIGKILL after ${Duration.format(grace)}), then handing ${name} over`)
            : Effect.flatMap(term.revokedReason, (reason) =>
              say(`term of ${name} (token ${term.token}) ended (${Option.getOrElse(reason, () => "stopped")}); stopping ${line.command}`)))
        const status = yield* runner.runFor(term, onStop)
        yield* say(`${line.command} exited with status ${status} while leading ${name}; giving the term up`)
        return yield* Effect.fail(new CommandExited({ status }))
      })
    const election = yield* Effect.fork(client.runWhileLeader(name, work))
    const signal = yield* Effect.raceFirst(
      Effect.map(Fiber.join(election), () => Option.none<NodeJS.Signals>()),
      Effect.map(signals.first, Option.some)
    )
    // A signal: forwarded to a running command by the runner; stop the election with handover.
    yield* Fiber.interrupt(election)
    yield* say(`stopped competing for ${name}${Option.isSome(signal) ? ` (${signal.value})` : ""}`)
    return Option.getOrElse(yield* Ref.get(runner.signalledExit), () => 0)
  }))

/** The elected command exited by itself: the work fails, so the term is given up. */
class CommandExited extends Data.TaggedError("CommandExited")<{ readonly status: number }> {
  override get message() {
    return `the command exited with status ${this.status}`
  }
}
