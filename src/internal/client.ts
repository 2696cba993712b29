/**
 * The shell (docs/design.md, "The shell"): one fiber per client that takes events from a queue, runs the pure
 * `Engine.step` with `now` from Effect's `Clock`, and performs the commands it returns (backend calls
 * in their own fibers; timers and the calls' deadlines by one sleeping fiber; the terms' deadline
 * cells; work fibers; events to a `PubSub`; completions to `Deferred`s). Only the loop fiber touches
 * the engine state.
 *
 * `make` builds the client's `Shell` record and wires the parts, each a module of its own taking
 * that record: `loop`, `backendCalls` (with `callsInFlight`), `timers`, `terms` (with
 * `sessionDeadline`), `completions`, and the API's `handles`, `elections`, `locks`, `partitions`,
 * `snapshot`.
 */
import * as Deferred from "effect/Deferred"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as FiberId from "effect/FiberId"
import * as ExecutionStrategy from "effect/ExecutionStrategy"
import * as LogLevel from "effect/LogLevel"
import * as PubSub from "effect/PubSub"
import * as Random from "effect/Random"
import * as Scope from "effect/Scope"
import * as Stream from "effect/Stream"
import * as Engine from "../Engine.js"
import type { SimbaConfigError } from "../Errors.js"
import { LeaseBackend } from "../LeaseBackend.js"
import type { SimbaClient } from "../Simba.js"
import * as SimbaConfig from "../SimbaConfig.js"
import type { SimbaEvent } from "../SimbaEvent.js"
import * as BackendCalls from "./backendCalls.js"
import * as CallsInFlight from "./callsInFlight.js"
import * as Completions from "./completions.js"
import * as Elections from "./elections.js"
import * as Holds from "./holds.js"
import * as Locks from "./locks.js"
import * as MultiLocks from "./multiLocks.js"
import * as Loop from "./loop.js"
import * as Mailbox from "./mailbox.js"
import * as Observe from "./observe.js"
import * as Partitions from "./partitions.js"
import * as SessionDeadline from "./sessionDeadline.js"
import { type Call, type LoopInput, offerNow, type Shell } from "./shell.js"
import * as Snapshot from "./snapshot.js"
import * as Timers from "./timers.js"

/**
 * Builds one client on the `LeaseBackend` in context, with its shell (for tests that look inside).
 * The client lives in the current `Scope`; closing the scope closes the session (with handover).
 */
export const makeWithShell = (
  input?: SimbaConfig.SimbaConfigInput
): Effect.Effect<{ readonly client: SimbaClient; readonly shell: Shell }, SimbaConfigError, LeaseBackend | Scope.Scope> =>
  Effect.gen(function*() {
    const config = yield* SimbaConfig.make(input)
    const backend = yield* LeaseBackend
    // The client's fibers live in a child scope, closed only after the session was closed: closing
    // needs the loop, timers and backend calls.
    const parentScope = yield* Effect.scope
    const scope = yield* Scope.fork(parentScope, ExecutionStrategy.sequential)
    const seed = yield* Random.nextIntBetween(0, 2 ** 31 - 1)
    const shell: Shell = {
      backend,
      logLevel: LogLevel.fromLiteral(config.logLevel),
      lockKeep: config.lockKeep,
      scope,
      events: Mailbox.make<LoopInput>(),
      pubsub: yield* PubSub.unbounded<SimbaEvent>(),
      state: Engine.initial({
        ...config,
        fullGrant: backend.remainingFor === undefined
          ? undefined
          : Duration.toMillis(backend.remainingFor(Duration.millis(config.leaseDuration)))
      }, seed),
      shutdown: yield* Deferred.make<void>(),
      isShutDown: false,
      hooks: new Map(),
      groupHooks: new Map(),
      completions: new Map(),
      // A call's deadline is answered here, in the sleeper's turn; the engine's timers go to the loop.
      timers: Timers.make(scope, (key, id) =>
        CallsInFlight.isCallKey(key)
          ? CallsInFlight.timeOut(shell.calls, id, FiberId.none)
          : offerNow(shell, { _tag: "Timer", key, id }), yield* Timers.liveClock(yield* Effect.clock)),
      terms: new Map(),
      deadline: SessionDeadline.make(),
      calls: CallsInFlight.make<Call, Engine.Response>({
        onReply: (call, response) => BackendCalls.reply(shell, call, response),
        onTimeout: (call) => BackendCalls.timedOut(shell, call)
      }),
      nextId: 1
    }

    // The calls' fibers are started by the loop outside the scope (`CallsInFlight.Fork`): stopped here,
    // after the loop (finalizers run in reverse order).
    yield* Scope.addFinalizer(scope, CallsInFlight.interruptAll(shell.calls))
    yield* Scope.addFinalizer(scope, Timers.stop(shell.timers))
    yield* Effect.forkIn(Loop.run(shell), scope)
    yield* Effect.forkIn(Loop.forwardHints(shell), scope)
    offerNow(shell, { _tag: "Boot" })

    const close = Completions.request(shell, (completion) => ({ _tag: "Close", completion })).pipe(Effect.asVoid)
    // Closing the scope closes the session first (finalizers run in reverse order), then the fibers.
    yield* Scope.addFinalizer(parentScope, Effect.zipRight(close, Completions.shutDown(shell)))

    const client: SimbaClient = {
      withLock: (name, body, options) => Locks.withLock(shell, name, body, options),
      tryWithLock: (name, body) => Locks.tryWithLock(shell, name, body),
      lock: (name, options) => Locks.lock(shell, name, options),
      withPermits: (name, permits, body, options) => Holds.withPermits(shell, name, permits, body, options),
      permits: (name, permits, options) => Holds.permits(shell, name, permits, options),
      withReadLock: (name, body, options) => Holds.withReadLock(shell, name, body, options),
      readLock: (name, options) => Holds.readLock(shell, name, options),
      withWriteLock: (name, body, options) => Locks.withLock(shell, name, body, options),
      writeLock: (name, options) => Locks.lock(shell, name, options),
      withLocks: (names, body, options) => MultiLocks.withLocks(shell, names, body, options),
      locks: (names, options) => MultiLocks.locks(shell, names, options),
      runWhileLeader: (name, work, options) => Elections.runWhileLeader(shell, name, work, options),
      election: (name, options) => Elections.election(shell, name, options),
      schedule: (name, schedule, task, options) => Elections.schedule(shell, name, schedule, task, options),
      partitionGroup: (group, partitions, work, options) =>
        Partitions.partitionGroup(shell, group, partitions, work, options),
      events: Stream.fromPubSub(shell.pubsub),
      observe: Observe.observe(shell),
      snapshot: Snapshot.snapshot(shell),
      close
    }
    return { client, shell }
  })

/**
 * Builds one client on the `LeaseBackend` in context. The client lives in the current `Scope`;
 * closing the scope closes the session (with handover).
 */
export const make = (
  input?: SimbaConfig.SimbaConfigInput
): Effect.Effect<SimbaClient, SimbaConfigError, LeaseBackend | Scope.Scope> =>
  Effect.map(makeWithShell(input), ({ client }) => client)
