/**
 * The eviction check at start: every server (in a cluster every master) must run with
 * `maxmemory-policy noeviction`, or the backend refuses to start (unless `allowEvictionPolicy`).
 *
 * Why: an evicted session key frees its leases on the server while the holder's client still
 * believes it leads (two leaders at once); every `volatile-*` policy evicts exactly those keys (they
 * carry `PX`), and `allkeys-*` also the lease hashes (tokens start again from 1) and queues.
 *
 * The policy is read with `CONFIG GET maxmemory-policy`; where that is refused (ACL, or a managed
 * service that renames `CONFIG`), from the `maxmemory_policy` field of `INFO memory`.
 */
import * as Data from "effect/Data"
import * as Effect from "effect/Effect"
import * as Either from "effect/Either"
import type { Redis } from "ioredis"
import type { BackendError } from "../../LeaseBackend.js"
import { addressOf, type Client, isCluster, type Tracker } from "./connection.js"

/**
 * A Redis server may evict Simba's keys (its `maxmemory-policy` is not `noeviction`), or its policy
 * could not be read: the backend refused to start. The message says why and what to set.
 */
export class EvictionPolicyError extends Data.TaggedError("EvictionPolicyError")<{
  /** `host:port` of the server. */
  readonly node: string
  /** Its `maxmemory-policy`; `undefined` when neither `CONFIG GET` nor `INFO memory` could read it. */
  readonly policy: string | undefined
  /** Why it could not be read (the servers' replies), when `policy` is `undefined`. */
  readonly unreadable?: string | undefined
}> {
  override get message() {
    const risk = "when memory runs out Redis may evict Simba's keys (every volatile-* policy evicts exactly the " +
      "session keys, which carry PX; allkeys-* also the lease hashes and queues), and then a lease is free on the " +
      "server while its holder still leads (two leaders at once) and fencing tokens start again from 1"
    const override = "allowEvictionPolicy: true (SIMBA_REDIS_ALLOW_EVICTION_POLICY=true)"
    return this.policy === undefined
      ? `the maxmemory-policy of Redis ${this.node} could not be read (${this.unreadable}); Simba refuses to start ` +
        `on a server that may evict its keys: ${risk}. Allow CONFIG GET or INFO to this user, or, if the policy ` +
        `is noeviction, pass ${override}`
      : `Redis ${this.node} runs with maxmemory-policy ${this.policy}, not noeviction: ${risk}. Run ` +
        `"CONFIG SET maxmemory-policy noeviction" and put "maxmemory-policy noeviction" in redis.conf, or ` +
        `pass ${override} to accept that risk`
  }
}

/** A reply the server refused (`NOPERM`, unknown command), as opposed to a failed connection. */
const isReplyError = (error: BackendError): boolean =>
  error.cause instanceof Error && error.cause.name === "ReplyError"

const reason = (error: BackendError): string =>
  error.cause instanceof Error ? error.cause.message : String(error.cause)

/** The policy of one server, or why it could not be read (`Left`). */
const policyOf = (
  { track }: Tracker,
  node: Redis
): Effect.Effect<Either.Either<string, string>, BackendError> => {
  const fromConfig = track("config get maxmemory-policy", () => node.config("GET", "maxmemory-policy")).pipe(
    Effect.map((reply): Either.Either<string, string> => {
      const value = Array.isArray(reply) ? reply[1] : undefined
      return typeof value === "string" ? Either.right(value) : Either.left("CONFIG GET: no maxmemory-policy in its reply")
    }),
    Effect.catchIf(isReplyError, (error) => Effect.succeed(Either.left(`CONFIG GET: ${reason(error)}`)))
  )
  const fromInfo = track("info memory", () => node.info("memory")).pipe(
    Effect.map((text): Either.Either<string, string> => {
      const match = /^maxmemory_policy:(\S+)/m.exec(text)
      return match === null ? Either.left("INFO memory: no maxmemory_policy field") : Either.right(match[1]!)
    }),
    Effect.catchIf(isReplyError, (error) => Effect.succeed(Either.left(`INFO memory: ${reason(error)}`)))
  )
  return Effect.flatMap(fromConfig, (config) =>
    Either.isRight(config)
      ? Effect.succeed(config)
      : Effect.map(fromInfo, (info) => Either.mapLeft(info, (why) => `${config.left}; ${why}`)))
}

/**
 * Reads the policy of every server (in a cluster every master); fails with the first that is not
 * `noeviction` or cannot be read, unless `allow`, which logs a warning for each instead.
 */
export const check = (
  client: Client,
  tracker: Tracker,
  allow: boolean
): Effect.Effect<void, EvictionPolicyError | BackendError> =>
  Effect.forEach(
    isCluster(client) ? client.nodes("master") : [client],
    (node) =>
      Effect.flatMap(policyOf(tracker, node), (policy) => {
        if (Either.isRight(policy) && policy.right === "noeviction") return Effect.void
        const error = Either.isRight(policy)
          ? new EvictionPolicyError({ node: addressOf(node), policy: policy.right })
          : new EvictionPolicyError({ node: addressOf(node), policy: undefined, unreadable: policy.left })
        const found = error.policy === undefined ? `an unreadable maxmemory-policy (${error.unreadable})` : `maxmemory-policy ${error.policy}`
        return allow
          ? Effect.logWarning(
            `simba redis: starting because allowEvictionPolicy is set, but Redis ${error.node} has ${found}: ` +
              "an evicted session key or lease hash lets two clients lead at once and restarts fencing tokens"
          )
          : Effect.fail(error)
      }),
    { concurrency: "unbounded", discard: true }
  )
