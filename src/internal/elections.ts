/** Elections: the `election` handle, `runWhileLeader` and leader-only `schedule`. */
import * as Cause from "effect/Cause"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import type * as Emit from "effect/StreamEmit"
import * as Option from "effect/Option"
import type * as Schedule from "effect/Schedule"
import type * as Scope from "effect/Scope"
import * as Stream from "effect/Stream"
import * as Engine from "../Engine.js"
import type { Election, ElectionError, ElectionOptions, ScheduleOptions, WorkFailureOptions } from "../Simba.js"
import type { ElectionStatus } from "../SimbaEvent.js"
import type * as Term from "../Term.js"
import { request } from "./completions.js"
import * as Handles from "./handles.js"
import type { Hooks, Shell } from "./shell.js"
import * as WorkFailure from "./workFailure.js"

/**
 * The current term of one election, as `term` reads it, and the subscribers of `terms` (made by the
 * first one). A `SubscriptionRef` per election (its `PubSub`, semaphore and streams) cost ~8 KB of
 * heap per idle election, for streams most elections never open.
 */
interface TermCell {
  /** No `Option` kept: one per leader is 48 bytes for nothing. */
  current: Term.Term | undefined
  subscribers: Set<Emit.EmitOpsPush<never, Option.Option<Term.Term>>> | undefined
}

/** Sets the current term and pushes it to every subscriber, at once (no subscriber sees it late). */
const setTerm = (cell: TermCell, term: Term.Term | undefined): void => {
  cell.current = term
  if (cell.subscribers !== undefined) for (const emit of cell.subscribers) emit.single(Option.fromNullable(term))
}

/**
 * The current term and every later change, as `SubscriptionRef.changes`: the current value is read
 * and the subscriber registered in one go, so nothing set in between is missed or seen twice.
 */
const changes = (cell: TermCell): Stream.Stream<Option.Option<Term.Term>> =>
  Stream.asyncPush<Option.Option<Term.Term>>((emit) =>
    Effect.acquireRelease(
      Effect.sync(() => {
        emit.single(Option.fromNullable(cell.current))
        const subscribers = cell.subscribers ?? new Set()
        cell.subscribers = subscribers
        subscribers.add(emit)
        return subscribers
      }),
      (subscribers) => Effect.sync(() => subscribers.delete(emit))
    )
  )

/** The terms won, from the current one (if any): what `terms` and `awaitLeader` read. */
const termsOf = (cell: TermCell): Stream.Stream<Term.Term> =>
  changes(cell).pipe(Stream.filterMap((term) => term), Stream.changes)

export const election = (
  shell: Shell,
  name: string,
  options?: ElectionOptions
): Effect.Effect<Election, ElectionError, Scope.Scope> =>
  Effect.gen(function*() {
    const cell: TermCell = { current: undefined, subscribers: undefined }
    const work = options?.work
    // Only an election with work can fail it: no backoff (a `Map`) for the others.
    const backoff = work === undefined ? undefined : WorkFailure.backoff(options)
    const hooks = new ElectionHooks(name, cell, options, backoff)
    const handle = yield* Handles.start(shell, name, work !== undefined, hooks)
    return new ElectionHandle(name, shell, handle, cell)
  })

/** An election's hooks, as methods over its fields (three closures per election cost more). */
class ElectionHooks implements Hooks {
  readonly #name: string
  readonly #cell: TermCell
  readonly #options: ElectionOptions | undefined
  readonly #backoff: WorkFailure.Backoff | undefined
  constructor(name: string, cell: TermCell, options: ElectionOptions | undefined, backoff: WorkFailure.Backoff | undefined) {
    this.#name = name
    this.#cell = cell
    this.#options = options
    this.#backoff = backoff
  }
  onElected(term: Term.Term): Effect.Effect<Option.Option<Effect.Effect<unknown, unknown>>> {
    return Effect.sync(() => {
      setTerm(this.#cell, term)
      const run = this.#options?.work?.(term)
      return run === undefined ? Option.none() : Option.some(WorkFailure.withRestart(this.#name, this.#options, run))
    })
  }
  onRevoked(): Effect.Effect<void> {
    return Effect.sync(() => setTerm(this.#cell, undefined))
  }
  onWorkFailed(_partition: number | undefined, ranFor: number): number | undefined {
    return this.#backoff?.failed(-1, ranFor)
  }
}

/**
 * What `election` returns. Every member is built when read, from the prototype: an idle election
 * keeps its four fields, not a record of built Effects and their closures.
 */
class ElectionHandle implements Election {
  readonly #shell: Shell
  readonly #handle: number
  readonly #cell: TermCell
  constructor(readonly name: string, shell: Shell, handle: number, cell: TermCell) {
    this.#shell = shell
    this.#handle = handle
    this.#cell = cell
  }
  get status(): Effect.Effect<ElectionStatus | "STOPPED"> {
    return Effect.sync(() => {
      const e = this.#shell.state.elections.get(this.#handle)
      return e === undefined ? "STOPPED" : Engine.publicStatus(e)
    })
  }
  get term(): Effect.Effect<Option.Option<Term.Term>> {
    return Effect.sync(() => Option.fromNullable(this.#cell.current))
  }
  get terms(): Stream.Stream<Term.Term> {
    return Stream.suspend(() => termsOf(this.#cell))
  }
  get awaitLeader(): Effect.Effect<Term.Term> {
    return Effect.suspend(() =>
      termsOf(this.#cell).pipe(Stream.runHead, Effect.flatMap(Option.match({ onNone: () => Effect.never, onSome: Effect.succeed })))
    )
  }
  get stop(): Effect.Effect<void> {
    return Handles.stop(this.#shell, this.#handle)
  }
  // A getter returning an arrow, not a method: callers pass it around unbound.
  get stepDown(): (cooldown: Duration.DurationInput) => Effect.Effect<void> {
    return (cooldown) =>
      Effect.asVoid(
        request(this.#shell, (completion) => ({
          _tag: "StepDown",
          handle: this.#handle,
          cooldown: Duration.toMillis(Duration.decode(cooldown)),
          completion
        }))
      )
  }
}

export const runWhileLeader = <E, R>(
  shell: Shell,
  name: string,
  work: (term: Term.Term) => Effect.Effect<unknown, E, R>,
  options?: WorkFailureOptions
): Effect.Effect<never, ElectionError, R> =>
  Effect.flatMap(Effect.context<R>(), (context) =>
    Effect.scoped(
      Effect.zipRight(
        election(shell, name, { ...options, work: (term) => Effect.provide(work(term), context) }),
        Effect.never
      )
    ))

export const schedule = <Out, E, R, R2>(
  shell: Shell,
  name: string,
  schedule: Schedule.Schedule<Out, unknown, R2>,
  task: (term: Term.Term) => Effect.Effect<unknown, E, R>,
  options?: ScheduleOptions
): Effect.Effect<never, ElectionError, R | R2> =>
  runWhileLeader(shell, name, (term) => {
    const run = task(term).pipe(
      Effect.catchAllCause((cause) =>
        Cause.isInterruptedOnly(cause)
          ? Effect.failCause(cause)
          : Effect.logWarning(`scheduled task ${name} failed; the next run still happens`, cause)
      )
    )
    // `Effect.schedule` waits for the first recurrence; `Effect.repeat` runs once first.
    return options?.immediate === true ? Effect.repeat(run, schedule) : Effect.schedule(run, schedule)
  })
