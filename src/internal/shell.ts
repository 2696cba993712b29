/**
 * The record of one client's shell: its channels and registries. Every part of the shell is a
 * function of this record (built once by `client.make`), not a closure over it.
 *
 * Hooks and completions are registered by API calls before their event is queued; everything else
 * is touched by the loop fiber only.
 */
import type * as Clock from "effect/Clock"
import type * as Deferred from "effect/Deferred"
import * as Effect from "effect/Effect"
import type * as Fiber from "effect/Fiber"
import type * as FiberId from "effect/FiberId"
import type * as LogLevel from "effect/LogLevel"
import type * as MetricLabel from "effect/MetricLabel"
import type * as Option from "effect/Option"
import type * as PubSub from "effect/PubSub"
import type * as Scope from "effect/Scope"
import type * as Engine from "../Engine.js"
import type { CallContext, DirectCalls, LeaseBackendService } from "../LeaseBackend.js"
import type { SimbaEvent } from "../SimbaEvent.js"
import type * as Term from "../Term.js"
import type * as CallsInFlight from "./callsInFlight.js"
import * as Mailbox from "./mailbox.js"
import type * as SessionDeadline from "./sessionDeadline.js"
import type * as Timers from "./timers.js"

/**
 * What the loop takes: an engine event, or a task the loop runs between two steps (so it sees every
 * step's state and published events together, e.g. `observe` subscribing and reading the state).
 */
export type LoopInput = Engine.Event | { readonly _tag: "Task"; readonly run: Effect.Effect<void> }

/**
 * What the loop's synchronous parts need of the loop fiber: its id, metric labels, clock and runtime
 * (its clock and labels are also the `CallContext` of the direct calls it starts).
 */
export interface LoopFiber extends CallContext {
  /** Who asks a fiber to stop (as `Fiber.interruptFork` would, without a fiber to do the asking). */
  readonly id: FiberId.FiberId
  /** The labels `Metric.increment` would read in the loop fiber (set once, when the loop was forked). */
  readonly metricLabels: ReadonlyArray<MetricLabel.MetricLabel>
  /** The loop fiber's clock (read synchronously for each step's `now`; `TestClock` under test). */
  readonly clock: Clock.Clock
  /** Starts a fiber at once on the loop fiber's runtime (its fiber refs and services): backend calls. */
  readonly fork: CallsInFlight.Fork
  /** The backend's calls without a fiber, when it offers them and no tracer is installed (`LeaseBackend.directOf`). */
  readonly direct: DirectCalls | undefined
}

/** A backend request the engine asked for. */
export type Call = Extract<Engine.Command, { _tag: "Call" }>

/** What the shell does with the terms of one handle (an election, a lock or a partition group). */
export interface Hooks {
  /**
   * Returns the work to run for the term, if any; `undefined` when the hook did all it had to at once
   * and the term has no work (a lock: the loop then goes on without an Effect).
   */
  readonly onElected: (
    term: Term.Term,
    partition: number | undefined
  ) => Effect.Effect<Option.Option<Effect.Effect<unknown, unknown>>> | undefined
  /** What to run when the term ends; `undefined` when there is nothing (the loop then goes on at once). */
  readonly onRevoked: (term: Term.Term, reason: Term.RevokeReason) => Effect.Effect<void> | undefined
  /**
   * The work of a term failed (not by its revocation) after running `ranFor` millis: the cooldown
   * (millis) to step down for, or `undefined` to keep the term.
   */
  readonly onWorkFailed?: ((partition: number | undefined, ranFor: number) => number | undefined) | undefined
}

/** A term between its `Elected` and its `Revoked`. */
export interface LiveTerm {
  readonly term: Term.Term
  readonly revoked: Term.Revocation
  work: Fiber.RuntimeFiber<unknown, unknown> | undefined
  readonly handle: number
  readonly group: string | undefined
}

export interface Shell {
  readonly backend: LeaseBackendService
  /** The `keep` (millis) of locks that set none, from the config's `lockKeep`. */
  readonly lockKeep: number
  /** The lowest level of the lifecycle logs (`logs.ts`), from the config's `logLevel`. */
  readonly logLevel: LogLevel.LogLevel
  /** The client's fibers (loop, timer; calls by a finalizer); closed after the session was closed. */
  readonly scope: Scope.Scope
  /** The engine's input (and the loop's tasks), taken by the loop fiber. */
  readonly events: Mailbox.Mailbox<LoopInput>
  readonly pubsub: PubSub.PubSub<SimbaEvent>
  /** The engine state; only the loop fiber sets it (readers take it as it is between two steps). */
  state: Engine.State
  /** Done once the client's scope closed: nobody will complete anything any more. */
  readonly shutdown: Deferred.Deferred<void>
  /** `shutdown` is done (read without an Effect by the requests). */
  isShutDown: boolean
  readonly hooks: Map<number, Hooks>
  readonly groupHooks: Map<string, Hooks>
  /** Callers waiting for the engine's `Complete`, by completion id. */
  readonly completions: Map<number, (outcome: Engine.Outcome) => void>
  /** The engine's armed timers and the calls' deadlines, and the one fiber sleeping until the earliest. */
  readonly timers: Timers.Timers
  /** The live terms by term id. */
  readonly terms: Map<number, LiveTerm>
  readonly deadline: SessionDeadline.SessionDeadline
  readonly calls: CallsInFlight.CallsInFlight<Call, Engine.Response>
  /** Handle and completion ids. */
  nextId: number
}

/** Queues `event` for the loop (the queue is unbounded: this never waits). */
export const offerNow = (shell: Shell, event: LoopInput): void => {
  Mailbox.offer(shell.events, event)
}

export const offer = (shell: Shell, event: LoopInput): Effect.Effect<void> => Effect.sync(() => offerNow(shell, event))

/** How many entries each registry holds: a long-lived client's must stay bounded (tests check it). */
export const sizes = (shell: Shell) => ({
  hooks: shell.hooks.size,
  groupHooks: shell.groupHooks.size,
  completions: shell.completions.size,
  timers: shell.timers.armed.size,
  terms: shell.terms.size,
  callsInFlight: shell.calls.pending.size
})
