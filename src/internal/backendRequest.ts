/**
 * An engine request as a backend call, and the backend's answer in the engine's terms (durations in
 * millis on the backend's clock).
 */
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import type * as Engine from "../Engine.js"
import type { BackendError, LeaseBackendService } from "../LeaseBackend.js"

/** Sends `request` to `backend` and translates the answer for the engine. */
export const send = (
  backend: LeaseBackendService,
  request: Engine.Request
): Effect.Effect<Engine.Response, BackendError> => {
  switch (request._tag) {
    case "OpenSession":
      return Effect.map(backend.openSession(Duration.millis(request.ttl)), (opened) => ({
        _tag: "Opened" as const,
        sessionId: opened.sessionId,
        remaining: Duration.toMillis(opened.remaining)
      }))
    case "KeepAlive":
      return Effect.map(
        backend.keepAlive(request.sessionId, Duration.millis(request.ttl), request.known),
        (reply): Engine.Response =>
          reply._tag === "Expired"
            ? { _tag: "Expired" }
            : {
              _tag: "Live",
              remaining: Duration.toMillis(reply.remaining),
              version: reply.version,
              leases: reply.leases,
              groups: reply.groups
            }
      )
    case "CloseSession":
      return Effect.as(backend.closeSession(request.sessionId), { _tag: "Done" as const })
    case "Acquire":
      return Effect.map(backend.acquire(request.sessionId, request.name), (reply): Engine.Response => {
        switch (reply._tag) {
          case "Granted":
            return { _tag: "Granted", token: reply.token }
          case "HeldBy":
            return {
              _tag: "HeldBy",
              token: reply.token,
              remaining: reply.remaining === undefined ? undefined : Duration.toMillis(reply.remaining)
            }
          case "Expired":
            return { _tag: "Expired" }
        }
      })
    case "Release":
      return Effect.as(backend.release(request.sessionId, request.name, request.token), { _tag: "Done" as const })
    case "Withdraw":
      return Effect.as(backend.withdraw(request.sessionId, request.name), { _tag: "Done" as const })
    case "Join":
      return Effect.map(
        backend.join(request.sessionId, request.group),
        (reply): Engine.Response => reply === "Joined" ? { _tag: "Joined" } : { _tag: "Expired" }
      )
    case "Leave":
      return Effect.as(backend.leave(request.sessionId, request.group), { _tag: "Done" as const })
    case "Members":
      return Effect.map(backend.members(request.group), (members) => ({ _tag: "MemberList" as const, members }))
  }
}

// A table rather than a string built per call: the name is needed for every call's metrics and span.
const operationNames: Record<Engine.Request["_tag"], string> = {
  OpenSession: "openSession",
  KeepAlive: "keepAlive",
  CloseSession: "closeSession",
  Acquire: "acquire",
  Release: "release",
  Withdraw: "withdraw",
  Join: "join",
  Leave: "leave",
  Members: "members"
}

/** The backend operation a request calls (`keepAlive`, `acquire`, ...), as metrics and errors name it. */
export const operationName = (request: Engine.Request): string => operationNames[request._tag]
