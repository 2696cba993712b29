/**
 * The client's lifecycle logs (docs/operations.md, "Logs"), derived in one place from the events the engine
 * publishes (`loop.ts` calls `log` for each), so every log line has an event on `Simba.events` and
 * the levels are decided here only. Lines below the client's `logLevel` are not written ("None"
 * silences them all); Effect's own minimum log level (Info by default) applies as well.
 */
import * as Effect from "effect/Effect"
import * as LogLevel from "effect/LogLevel"
import type { ElectionKind } from "../Engine.js"
import { format, type SimbaEvent } from "../SimbaEvent.js"
import type { Shell } from "./shell.js"

/**
 * The level of each event's log line. A lock's term is one `withLock` call: its start and its end
 * are Debug (an application taking thousands of locks would otherwise print two lines per call);
 * a lock lost while its body ran is Warning (the body was interrupted).
 */
export const levelOf = (event: SimbaEvent, kind?: ElectionKind): LogLevel.LogLevel => {
  switch (event._tag) {
    case "Elected":
      return kind === "lock" ? LogLevel.Debug : LogLevel.Info
    case "Revoked":
      if (kind !== "lock") return LogLevel.Info
      return event.reason === "STOPPED" ? LogLevel.Debug : LogLevel.Warning
    case "SessionEnded":
      // Closing is the user's doing; a session lost (deadline passed, expired) ends every term.
      return event.reason === "STOPPED" ? LogLevel.Info : LogLevel.Error
    default:
      return fixedLevels[event._tag]
  }
}

/** The events whose level is the same whatever they say. */
const fixedLevels: Record<Exclude<SimbaEvent["_tag"], "Elected" | "Revoked" | "SessionEnded">, LogLevel.LogLevel> = {
  SessionOpened: LogLevel.Info,
  SessionLive: LogLevel.Info,
  PartitionsAssigned: LogLevel.Info,
  SessionSuspended: LogLevel.Warning,
  SessionLeaseShortened: LogLevel.Warning,
  BackendFailed: LogLevel.Warning,
  TokenRegressed: LogLevel.Error,
  StatusChanged: LogLevel.Debug,
  GroupView: LogLevel.Debug
}

/** Why the line matters, where the event alone does not say it. */
const explanation = (event: SimbaEvent): string => {
  switch (event._tag) {
    case "SessionSuspended":
      return ": a renewal failed; terms stay valid until the session's local deadline, renewals are retried"
    case "SessionEnded":
      return event.reason === "STOPPED" ? "" : ": every term of the session ended; opening a new session"
    case "SessionLeaseShortened":
      // Either the store granted less than asked (ZooKeeper caps timeouts), or a large margin leaves
      // too little of a whole grant: the line must not blame the store for the second.
      return ": two renewals at renewInterval do not fit in the granted time less drift and margin (the backend granted less than leaseDuration, or the margin is large); renewing more often"
    case "TokenRegressed":
      return event.token === undefined
        ? ": the store no longer lists a lease of a live session (it lost state); the term ended"
        : ": the store lost state (restart without persistence, flush, deleted lease); no term of this name starts for one lease duration, and a fenced resource that saw the higher token refuses lower ones"
    default:
      return ""
  }
}

const annotationsOf = (event: SimbaEvent): Record<string, string> => {
  switch (event._tag) {
    case "SessionOpened":
    case "SessionSuspended":
    case "SessionLive":
    case "SessionLeaseShortened":
      return { sessionId: event.sessionId }
    case "SessionEnded":
      return { sessionId: event.sessionId, reason: event.reason }
    case "Elected":
      return { lease: event.name, token: String(event.token) }
    case "Revoked":
      return { lease: event.name, token: String(event.token), reason: event.reason }
    case "StatusChanged":
      return { lease: event.name, status: event.status }
    case "GroupView":
    case "PartitionsAssigned":
      return { group: event.group }
    case "BackendFailed":
      return { operation: event.operation, error: event.error }
    case "TokenRegressed":
      return { lease: event.name, seen: String(event.seen), token: event.token === undefined ? "absent" : String(event.token) }
  }
}

/**
 * The log line of `event`, annotated with the backend and the current session; `undefined` when
 * its level is below the client's (most events of a lock: nothing to run).
 */
export const log = (shell: Shell, event: SimbaEvent, kind?: ElectionKind): Effect.Effect<void> | undefined => {
  const level = levelOf(event, kind)
  if (!LogLevel.greaterThanEqual(level, shell.logLevel)) return undefined
  const sessionId = shell.state.session.id
  return Effect.logWithLevel(level, `Simba: ${format(event)}${explanation(event)}`).pipe(
    Effect.annotateLogs({
      backend: shell.backend.backend,
      ...(sessionId === undefined ? {} : { sessionId }),
      ...(kind === undefined ? {} : { kind }),
      ...annotationsOf(event)
    })
  )
}
