/**
 * An engine request as a backend call, and the backend's answer in the engine's terms (durations in
 * millis on the backend's clock).
 */
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import type * as Engine from "../Engine.js"
import * as Either from "effect/Either"
import type {
  AcquireReply,
  BackendError,
  CallContext,
  DirectCalls,
  KeepAliveReply,
  LeaseBackendService,
  OpenedSession
} from "../LeaseBackend.js"

/** A failed call as the engine reads it (a service not built by `LeaseBackend.make` may fail with anything). */
const failed = (error: unknown): Engine.Response => ({
  _tag: "Failed",
  error: error instanceof Error ? error.message : String(error)
})

/** The backend's answer through `translate`, or `Failed`: one match per call, never a failure. */
const answer = <A>(call: Effect.Effect<A, BackendError>, translate: (reply: A) => Engine.Response) =>
  Effect.match(call, { onFailure: failed, onSuccess: translate })

const done: Engine.Response = { _tag: "Done" }
const isDone = (): Engine.Response => done

const opened = (session: OpenedSession): Engine.Response => ({
  _tag: "Opened",
  sessionId: session.sessionId,
  remaining: Duration.toMillis(session.remaining)
})

const renewed = (reply: KeepAliveReply): Engine.Response =>
  reply._tag === "Expired"
    ? { _tag: "Expired" }
    : {
      _tag: "Live",
      remaining: Duration.toMillis(reply.remaining),
      version: reply.version,
      leases: reply.leases,
      groups: reply.groups
    }

const acquired = (reply: AcquireReply): Engine.Response => {
  switch (reply._tag) {
    case "Granted":
      return reply.reserved === undefined
        ? { _tag: "Granted", token: reply.token }
        : { _tag: "Granted", token: reply.token, reserved: reply.reserved }
    case "HeldBy":
      return {
        _tag: "HeldBy",
        token: reply.token,
        remaining: reply.remaining === undefined ? undefined : Duration.toMillis(reply.remaining)
      }
    case "Expired":
      return { _tag: "Expired" }
    case "Conflict":
      return { _tag: "Conflict", held: reply.held, asked: reply.asked }
  }
}

/** Sends `request` to `backend` and translates the answer for the engine (a failure is `Failed`). */
export const attempt = (backend: LeaseBackendService, request: Engine.Request): Effect.Effect<Engine.Response> => {
  switch (request._tag) {
    case "OpenSession":
      return answer(backend.openSession(Duration.millis(request.ttl)), opened)
    case "KeepAlive":
      return answer(backend.keepAlive(request.sessionId, Duration.millis(request.ttl), request.known), renewed)
    case "CloseSession":
      return answer(backend.closeSession(request.sessionId), isDone)
    case "Acquire":
      return answer(backend.acquire(request.sessionId, request.name, request.reserve), acquired)
    case "Release":
      return answer(backend.release(request.sessionId, request.name, request.token), isDone)
    case "Withdraw":
      return answer(backend.withdraw(request.sessionId, request.name), isDone)
    case "Join":
      return answer(
        backend.join(request.sessionId, request.group),
        (reply) => reply === "Joined" ? { _tag: "Joined" } : { _tag: "Expired" }
      )
    case "Leave":
      return answer(backend.leave(request.sessionId, request.group), isDone)
    case "Members":
      return answer(backend.members(request.group), (members) => ({ _tag: "MemberList", members }))
  }
}

/** A direct call's answer through `translate`, or `Failed`, to `done`. */
const answerWith = <A>(translate: (reply: A) => Engine.Response, done: (response: Engine.Response) => void) =>
(result: Either.Either<A, BackendError>): void => done(Either.isRight(result) ? translate(result.right) : failed(result.left))

/**
 * Sends `request` without a fiber when the backend offers its direct form (`LeaseBackend.directOf`):
 * `done` is given the engine's answer once, from the driver's callback. `false`: no direct form for
 * this request (nothing was sent; `attempt` it).
 */
export const attemptDirect = (
  direct: DirectCalls,
  context: CallContext,
  request: Engine.Request,
  done: (response: Engine.Response) => void
): boolean => {
  switch (request._tag) {
    case "KeepAlive":
      if (direct.keepAlive === undefined) return false
      direct.keepAlive(context, request.sessionId, request.ttl, request.known, answerWith(renewed, done))
      return true
    case "Acquire":
      if (direct.acquire === undefined) return false
      direct.acquire(context, request.sessionId, request.name, request.reserve ?? 1, answerWith(acquired, done))
      return true
    case "Release":
      if (direct.release === undefined) return false
      direct.release(context, request.sessionId, request.name, request.token, answerWith(isDone, done))
      return true
    default:
      return false
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
