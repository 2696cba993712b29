/**
 * `observe`: the client's current state replayed as events, then every live event, with nothing
 * missed or repeated in between (README "Observing from the start"). The subscription is taken and
 * the state read while holding the loop's `publishing` permit, which the loop holds from setting a
 * step's state until it has published that step's events: so every event is either reflected in the
 * replayed state or delivered live, never both, and `Elected`/`Revoked` still pair up.
 */
import * as Effect from "effect/Effect"
import * as PubSub from "effect/PubSub"
import * as Ref from "effect/Ref"
import * as Stream from "effect/Stream"
import * as Engine from "../Engine.js"
import { SimbaEvent } from "../SimbaEvent.js"
import type { Shell } from "./shell.js"

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
    shell.publishing.withPermits(1)(
      Effect.gen(function*() {
        const live = yield* PubSub.subscribe(shell.pubsub)
        const current = yield* Ref.get(shell.state)
        return Stream.concat(Stream.fromIterable(replay(current)), Stream.fromQueue(live))
      })
    )
  )
