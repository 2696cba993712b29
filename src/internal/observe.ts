/**
 * `observe`: the client's current state replayed as events, then every live event, with nothing
 * missed or repeated in between (docs/operations.md, "Events"). The subscription is taken and
 * the state read by the loop itself, between two steps (a `Task`): a step's state and its published
 * events go together, so every event is either reflected in the replayed state or delivered live,
 * never both, and `Elected`/`Revoked` still pair up.
 */
import * as Deferred from "effect/Deferred"
import * as Effect from "effect/Effect"
import * as PubSub from "effect/PubSub"
import type * as Queue from "effect/Queue"
import * as Scope from "effect/Scope"
import * as Stream from "effect/Stream"
import * as Engine from "../Engine.js"
import { SimbaEvent } from "../SimbaEvent.js"
import { offer, type Shell } from "./shell.js"

/** The events that bring an observer from nothing to `state`, in the order the live ones come. */
export const replay = (state: Engine.State): ReadonlyArray<SimbaEvent> => {
  const events: Array<SimbaEvent> = []
  const { id, status } = state.session
  if (id !== undefined && (status === "LIVE" || status === "SUSPENDED")) {
    events.push(SimbaEvent.SessionOpened({ sessionId: id }))
    if (status === "SUSPENDED") events.push(SimbaEvent.SessionSuspended({ sessionId: id }))
  }
  for (const g of state.groups.values()) {
    if (g.members.length > 0) events.push(SimbaEvent.GroupView({ group: g.group, members: g.members }))
    if (g.owned.length > 0) events.push(SimbaEvent.PartitionsAssigned({ group: g.group, partitions: g.owned }))
  }
  for (const e of state.elections.values()) {
    if (e.status === "QUEUED") continue
    // A term still held and not revoked: its `Elected` (its `Revoked` comes live).
    if (e.term !== undefined && !e.term.revoked) events.push(SimbaEvent.Elected({ name: e.name, token: e.term.token }))
    events.push(SimbaEvent.StatusChanged({ name: e.name, status: Engine.publicStatus(e) }))
  }
  return events
}

export const observe = (shell: Shell): Stream.Stream<SimbaEvent> =>
  Stream.unwrapScoped(
    Effect.gen(function*() {
      const scope = yield* Effect.scope
      const taken = yield* Deferred.make<readonly [Queue.Dequeue<SimbaEvent>, ReadonlyArray<SimbaEvent>]>()
      const take = PubSub.subscribe(shell.pubsub).pipe(
        Scope.extend(scope),
        // Replayed here: the loop drops a state's history once the next step replaces it.
        Effect.map((live) => [live, replay(shell.state)] as const)
      )
      // Taken by the loop, between two steps; the subscription lives in the observer's scope. Once
      // the client is shut down no step comes any more (and the loop may never run the task).
      yield* offer(shell, { _tag: "Task", run: Effect.flatMap(take, (taking) => Deferred.succeed(taken, taking)) })
      const [live, replayed] = yield* Effect.raceFirst(
        Deferred.await(taken),
        Effect.zipRight(Deferred.await(shell.shutdown), take)
      )
      return Stream.concat(Stream.fromIterable(replayed), Stream.fromQueue(live))
    })
  )
