/**
 * The user API: the `Simba` service, its accessors, `make` and `layer`.
 *
 * ```ts
 * yield* Simba.withLock("orders", (term) => charge(order, term.token))
 * yield* Effect.forkScoped(Simba.runWhileLeader("billing", (term) => billingLoop))
 * ```
 */
import * as Context from "effect/Context"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import type * as Schedule from "effect/Schedule"
import type * as Scope from "effect/Scope"
import * as Stream from "effect/Stream"
import * as Client from "./Client.js"
import type { SimbaConfigError } from "./Errors.js"
import type { LeaseBackend } from "./LeaseBackend.js"
import * as SimbaConfig from "./SimbaConfig.js"
import type { SimbaEvent } from "./SimbaEvent.js"
import type { Term } from "./Term.js"

export type {
  Election,
  ElectionError,
  ElectionOptions,
  LockError,
  LockOptions,
  SimbaClient,
  SimbaSnapshot
} from "./Client.js"

/** The client service. */
export class Simba extends Context.Tag("simba/Simba")<Simba, Client.SimbaClient>() {}

/**
 * Builds one client on the `LeaseBackend` in context, living in the current scope. Several clients
 * can share one backend (tests, demos).
 */
export const make: (
  config?: SimbaConfig.SimbaConfigInput
) => Effect.Effect<Client.SimbaClient, SimbaConfigError, LeaseBackend | Scope.Scope> = Client.make

/** A layer providing `Simba` from the `LeaseBackend` in context; the session closes with the layer. */
export const layer = (
  config?: SimbaConfig.SimbaConfigInput
): Layer.Layer<Simba, SimbaConfigError, LeaseBackend> => Layer.scoped(Simba, Client.make(config))

/** Like `layer`, with the timing read from the environment (`SIMBA_*`). */
export const layerConfig: Layer.Layer<Simba, SimbaConfigError, LeaseBackend> = Layer.scoped(
  Simba,
  Effect.flatMap(SimbaConfig.fromEnv, (config) => Client.make(config))
)

// Accessors ------------------------------------------------------------------------------------------

/** `withLock` on the `Simba` in context. */
export const withLock = <A, E, R>(
  name: string,
  body: Effect.Effect<A, E, R> | ((term: Term) => Effect.Effect<A, E, R>),
  options?: Client.LockOptions
): Effect.Effect<A, E | Client.LockError, R | Simba> => Effect.flatMap(Simba, (simba) => simba.withLock(name, body, options))

/** `lock` on the `Simba` in context. */
export const lock = (
  name: string,
  options?: Client.LockOptions
): Effect.Effect<Term, Client.LockError, Simba | Scope.Scope> => Effect.flatMap(Simba, (simba) => simba.lock(name, options))

/** `runWhileLeader` on the `Simba` in context. */
export const runWhileLeader = <E, R>(
  name: string,
  work: (term: Term) => Effect.Effect<unknown, E, R>
): Effect.Effect<never, Client.ElectionError, R | Simba> =>
  Effect.flatMap(Simba, (simba) => simba.runWhileLeader(name, work))

/** `election` on the `Simba` in context. */
export const election = (
  name: string,
  options?: Client.ElectionOptions
): Effect.Effect<Client.Election, Client.ElectionError, Simba | Scope.Scope> =>
  Effect.flatMap(Simba, (simba) => simba.election(name, options))

/** `schedule` on the `Simba` in context. */
export const schedule = <Out, E, R, R2>(
  name: string,
  schedule: Schedule.Schedule<Out, unknown, R2>,
  task: (term: Term) => Effect.Effect<unknown, E, R>
): Effect.Effect<never, Client.ElectionError, R | R2 | Simba> =>
  Effect.flatMap(Simba, (simba) => simba.schedule(name, schedule, task))

/** `partitionGroup` on the `Simba` in context. */
export const partitionGroup = <E, R>(
  group: string,
  partitions: number,
  work: (partition: number, term: Term) => Effect.Effect<unknown, E, R>
): Effect.Effect<never, Client.ElectionError | SimbaConfigError, R | Simba> =>
  Effect.flatMap(Simba, (simba) => simba.partitionGroup(group, partitions, work))

/** `events` of the `Simba` in context. */
export const events: Stream.Stream<SimbaEvent, never, Simba> = Stream.unwrap(Effect.map(Simba, (simba) => simba.events))

/** `snapshot` of the `Simba` in context. */
export const snapshot: Effect.Effect<Client.SimbaSnapshot, never, Simba> = Effect.flatMap(Simba, (simba) => simba.snapshot)

/** `close` the `Simba` in context. */
export const close: Effect.Effect<void, never, Simba> = Effect.flatMap(Simba, (simba) => simba.close)
