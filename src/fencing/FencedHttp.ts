/**
 * Fenced HTTP (`simba/fencing/http`), with `@effect/platform`: a client that sends a term's token in a
 * header, and a server middleware that refuses a token lower than the highest it has seen for the
 * resource, with `409 Conflict`.
 *
 * The header is `Simba-Fencing-Token: <resource>=<token>` (resource: 1–255 characters of
 * `[A-Za-z0-9._:/@-]`; token: a positive decimal integer). A refusal answers 409 with
 * `Simba-Fencing-Highest: <highest>` and a JSON body; `withFence` turns that reply into
 * `FencedWriteRejectedError` on the client, so both sides see the same typed error.
 *
 * ```ts
 * import * as FencedHttp from "simba/fencing/http"
 *
 * // server: one store per service (memory, or FencedSql.store for a fence that survives restarts)
 * const fenced = FencedHttp.middleware(yield* Fencing.memoryStore)
 * HttpServer.serve(fenced(app))
 *
 * // client, inside the critical section
 * yield* Simba.withLock("orders", (term) =>
 *   HttpClient.HttpClient.pipe(
 *     Effect.map(FencedHttp.withFence("orders", term)),
 *     Effect.flatMap((client) => client.post("http://inventory/reserve"))))
 * ```
 *
 * The server runs each fenced request inside the store's per-resource critical section, so two
 * racing requests are handled one after the other and the lower token never lands after the higher.
 * Requests without the header pass through untouched, unless `required` is set (then 428).
 */
import * as HttpApp from "@effect/platform/HttpApp"
import * as HttpClient from "@effect/platform/HttpClient"
import * as HttpClientRequest from "@effect/platform/HttpClientRequest"
import type * as HttpClientResponse from "@effect/platform/HttpClientResponse"
import * as HttpServerRequest from "@effect/platform/HttpServerRequest"
import * as HttpServerResponse from "@effect/platform/HttpServerResponse"
import * as Effect from "effect/Effect"
import * as Either from "effect/Either"
import * as Option from "effect/Option"
import {
  brokenTokenRule,
  type Fence,
  FencedWriteRejectedError,
  type FenceStore,
  InvalidFenceError,
  validate
} from "./Fencing.js"

export {
  type Fence,
  FencedWriteRejectedError,
  type FenceStore,
  InvalidFenceError,
  memoryStore
} from "./Fencing.js"

/** The request header carrying `<resource>=<token>` (lower case, as Node and `Headers` keep names). */
export const tokenHeader = "simba-fencing-token"

/** The 409 reply's header carrying the highest token the resource has seen. */
export const highestHeader = "simba-fencing-highest"

const resourceRules = {
  maxLength: 255,
  allowed: /^[A-Za-z0-9._:/@-]+$/,
  allowedText: "the characters [A-Za-z0-9._:/@-]"
} as const

/** A fence as a request carries it. */
export interface RequestFence {
  readonly resource: string
  readonly token: bigint
}

/** The header value for `resource` and a fence, once both are valid. */
export const headerValue = (resource: string, fence: Fence): Effect.Effect<string, InvalidFenceError> =>
  Effect.map(validate(resource, fence, resourceRules), (token) => `${resource}=${token}`)

/** Parses a header value, answering the rule it breaks on the left. */
export const parseHeader = (value: string): Either.Either<RequestFence, string> => {
  const separator = value.lastIndexOf("=")
  if (separator <= 0) return Either.left(`expected ${tokenHeader}: <resource>=<token>`)
  const resource = value.slice(0, separator).trim()
  const digits = value.slice(separator + 1).trim()
  if (!/^[1-9][0-9]{0,18}$/.test(digits)) return Either.left("the token must be a positive decimal integer")
  const token = BigInt(digits)
  const rule = resource.length > resourceRules.maxLength
    ? `the resource must be at most ${resourceRules.maxLength} characters`
    : !resourceRules.allowed.test(resource)
    ? `the resource may contain only ${resourceRules.allowedText}`
    : brokenTokenRule(token)
  return rule === undefined ? Either.right({ resource, token }) : Either.left(rule)
}

/** The fence the current request carries, if any (for a handler that passes the token on). */
export const requestFence: Effect.Effect<
  Option.Option<Either.Either<RequestFence, string>>,
  never,
  HttpServerRequest.HttpServerRequest
> = Effect.map(
  HttpServerRequest.HttpServerRequest,
  (request) => Option.map(Option.fromNullable(request.headers[tokenHeader]), parseHeader)
)

const problem = (status: number, body: Record<string, string>, headers?: Record<string, string>) =>
  HttpServerResponse.unsafeJson(body, headers === undefined ? { status } : { status, headers })

/** The 409 reply for a refused request. */
export const rejectedResponse = (error: FencedWriteRejectedError): HttpServerResponse.HttpServerResponse =>
  problem(409, {
    error: error._tag,
    resource: error.resource,
    token: error.token.toString(),
    highest: error.highest.toString()
  }, { [highestHeader]: error.highest.toString() })

export interface MiddlewareOptions {
  /** Refuse requests without the header with 428 Precondition Required (default: let them through). */
  readonly required?: boolean | undefined
}

/**
 * Guards an `HttpApp` (a router, a handler) with `store`: a request carrying
 * `Simba-Fencing-Token: <resource>=<token>` is handled only if the token is not below the highest the
 * store has seen for the resource, inside the store's critical section for that resource; otherwise
 * 409. A malformed header answers 400. Any `FencedWriteRejectedError` the app itself fails with (a
 * fenced SQL write it made, say) answers 409 too.
 */
export const middleware = <SE, SR>(store: FenceStore<SE, SR>, options?: MiddlewareOptions) =>
<E, R>(
  app: HttpApp.Default<E, R>
): HttpApp.Default<E | SE, R | SR | HttpServerRequest.HttpServerRequest> =>
  Effect.gen(function*() {
    const request = yield* HttpServerRequest.HttpServerRequest
    const header = request.headers[tokenHeader]
    if (header === undefined) {
      return options?.required === true
        ? problem(428, { error: "FencingTokenRequired", message: `this resource requires the ${tokenHeader} header` })
        : yield* Effect.catchIf(app, isRejected<E>, (error) => Effect.succeed(rejectedResponse(error)))
    }
    const parsed = parseHeader(header)
    if (Either.isLeft(parsed)) {
      return problem(400, { error: "InvalidFenceError", message: `${tokenHeader}: ${parsed.left}` })
    }
    const { resource, token } = parsed.right
    return yield* store.fenced(resource, token, app).pipe(
      Effect.catchIf(isRejected<E | SE | FencedWriteRejectedError>, (error) => Effect.succeed(rejectedResponse(error)))
    )
  })

const isRejected = <E>(error: E): error is Extract<E, FencedWriteRejectedError> =>
  error instanceof FencedWriteRejectedError

/**
 * A client that sends `Simba-Fencing-Token: <resource>=<token>` with every request, and fails with
 * `FencedWriteRejectedError` when the server answers 409 with `Simba-Fencing-Highest`. Apply it before
 * `HttpClient.filterStatusOk` (`client.pipe(withFence(...), HttpClient.filterStatusOk)`), so that it
 * sees the 409 before that turns it into a `ResponseError`.
 */
export const withFence = (resource: string, fence: Fence) =>
<E, R>(
  client: HttpClient.HttpClient.With<E, R>
): HttpClient.HttpClient.With<E | InvalidFenceError | FencedWriteRejectedError, R> =>
  client.pipe(
    HttpClient.mapRequestEffect((request) =>
      Effect.map(headerValue(resource, fence), (value) => HttpClientRequest.setHeader(request, tokenHeader, value))
    ),
    HttpClient.transformResponse(Effect.flatMap((response) => refusal(response, resource, fence)))
  )

/** The response, or `FencedWriteRejectedError` when it is a fencing refusal (409 with the highest). */
const refusal = (
  response: HttpClientResponse.HttpClientResponse,
  resource: string,
  fence: Fence
): Effect.Effect<HttpClientResponse.HttpClientResponse, FencedWriteRejectedError> => {
  const highest = response.headers[highestHeader]
  if (response.status !== 409 || highest === undefined || !/^[0-9]{1,19}$/.test(highest)) {
    return Effect.succeed(response)
  }
  return Effect.fail(
    new FencedWriteRejectedError({
      resource,
      token: typeof fence === "bigint" ? fence : fence.token,
      highest: BigInt(highest)
    })
  )
}
