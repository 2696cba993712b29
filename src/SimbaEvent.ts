/**
 * Everything the client does, as one stream of events (`Simba.events`). For every term, `Elected` is
 * followed by exactly one `Revoked`.
 */
import * as Data from "effect/Data"
import type { RevokeReason } from "./Term.js"

/** Election states as `snapshot` reports them. */
export type ElectionStatus = "CANDIDATE" | "LEADER" | "HANDOVER" | "COOLDOWN"

/** Session states as `snapshot` reports them. */
export type SessionStatus = "OPENING" | "LIVE" | "SUSPENDED" | "CLOSED"

/** Why a session ended for this client. */
export type SessionEndReason = "STOPPED" | "DEADLINE_PASSED" | "SESSION_EXPIRED"

export type SimbaEvent = Data.TaggedEnum<{
  SessionOpened: { readonly sessionId: string }
  SessionSuspended: { readonly sessionId: string }
  SessionLive: { readonly sessionId: string }
  SessionEnded: { readonly sessionId: string; readonly reason: SessionEndReason }
  /** The backend granted less than `leaseDuration`: renewal now runs every `renewEvery` millis. */
  SessionLeaseShortened: { readonly sessionId: string; readonly granted: number; readonly renewEvery: number }
  Elected: { readonly name: string; readonly token: bigint }
  Revoked: { readonly name: string; readonly token: bigint; readonly reason: RevokeReason }
  StatusChanged: { readonly name: string; readonly status: ElectionStatus | "STOPPED" }
  GroupView: { readonly group: string; readonly members: ReadonlyArray<string> }
  PartitionsAssigned: { readonly group: string; readonly partitions: ReadonlyArray<number> }
  BackendFailed: { readonly operation: string; readonly error: string }
  /**
   * The store answered a token of `name` at or below `seen`, the highest this client had seen for it
   * (from a grant, a hand-off grant, a renewal's lease list or a `HeldBy`): the store lost state
   * (restart without persistence, a flush, a deleted lease). `token` is `undefined` when a renewal no
   * longer lists a lease the live session held. See docs/operations.md, "Token regressions".
   */
  TokenRegressed: { readonly name: string; readonly seen: bigint; readonly token: bigint | undefined }
}>

export const SimbaEvent = Data.taggedEnum<SimbaEvent>()

/** A one-line, human-readable rendering of an event (used by the demo and by logs). */
export const format = (event: SimbaEvent): string => {
  switch (event._tag) {
    case "SessionOpened":
    case "SessionSuspended":
    case "SessionLive":
      return `${event._tag} ${event.sessionId.slice(0, 8)}`
    case "SessionEnded":
      return `SessionEnded ${event.sessionId.slice(0, 8)} (${event.reason})`
    case "SessionLeaseShortened":
      return `SessionLeaseShortened granted=${event.granted}ms renewEvery=${Math.round(event.renewEvery)}ms`
    case "Elected":
      return `Elected ${event.name} token=${event.token}`
    case "Revoked":
      return `Revoked ${event.name} token=${event.token} (${event.reason})`
    case "StatusChanged":
      return `StatusChanged ${event.name} -> ${event.status}`
    case "GroupView":
      return `GroupView ${event.group} [${event.members.map((m) => m.slice(0, 8)).join(", ")}]`
    case "PartitionsAssigned":
      return `PartitionsAssigned ${event.group} [${event.partitions.join(", ")}]`
    case "BackendFailed":
      return `BackendFailed ${event.operation}: ${event.error}`
    case "TokenRegressed":
      return `TokenRegressed ${event.name} seen=${event.seen} token=${event.token ?? "absent"}`
  }
}
