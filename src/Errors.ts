/**
 * Every error the client can fail with. Each is a `Data.TaggedError`, so `Effect.catchTag` works on
 * the `_tag` names fixed by the spec. No error has a field called `name`: it would shadow
 * `Error.name`, and logs and stacks would lose the class; the lease is `lease`.
 */
import * as Data from "effect/Data"
import type { RevokeReason } from "./Term.js"

/** A lease or group name broke one of the naming rules; no backend was called. */
export class InvalidLeaseNameError extends Data.TaggedError("InvalidLeaseNameError")<{
  readonly lease: string
  readonly rule: string
}> {
  override get message() {
    return `invalid lease name ${JSON.stringify(this.lease)}: ${this.rule}`
  }
}

/**
 * A setting of the client (`SimbaConfig`) or of a backend is malformed or breaks a rule. The message
 * names where it was set, the value and the rule:
 * `invalid Simba configuration, SIMBA_REDIS_LOCK_DELAY="8" (redis.lockDelay): must be a duration ...`
 * from the environment, `invalid Simba configuration, redis.lockDelay="8": must be ...` from code.
 */
export class SimbaConfigError extends Data.TaggedError("SimbaConfigError")<{
  /** The option: a `SimbaConfig` field (`leaseDuration`) or `<backend>.<option>` (`redis.url`). */
  readonly field: string
  readonly rule: string
  /**
   * Where the values came from, for a rule between several settings read from the environment: the
   * variables and their values (`from SIMBA_LEASE_DURATION="1s", SIMBA_RENEW_INTERVAL="900ms"`).
   */
  readonly source?: string | undefined
  /** The value refused, as shown: text quoted, a URL with its password replaced by `***`. */
  readonly value?: string | undefined
  /** The environment variable the value was read from, when it was (`SIMBA_REDIS_URL`). */
  readonly variable?: string | undefined
}> {
  override get message() {
    const value = this.value === undefined ? "" : `=${this.value}`
    const where = this.variable === undefined ? `${this.field}${value}` : `${this.variable}${value} (${this.field})`
    return `invalid Simba configuration, ${where}${this.source === undefined ? "" : ` (${this.source})`}: ${this.rule}`
  }
}

/** The term of a `withLock` body ended involuntarily; the body was interrupted. */
export class LockLostError extends Data.TaggedError("LockLostError")<{
  readonly lease: string
  readonly token: bigint
  readonly reason: RevokeReason
}> {
  override get message() {
    return `lock ${this.lease} (token ${this.token}) lost: ${this.reason}`
  }
}

/** The lock was not acquired within `options.timeout`; the attempt was abandoned for good. */
export class LockTimeoutError extends Data.TaggedError("LockTimeoutError")<{
  readonly lease: string
  readonly timeout: string
}> {
  override get message() {
    return `lock ${this.lease} not acquired within ${this.timeout}`
  }
}

/**
 * The name is already in use on this client by an election, a leader-only schedule or
 * `runWhileLeader` (or, for an election, by a lock): locks, elections and partition leases share one
 * name space per client, and a name serves one of them at a time.
 */
export class ElectionAlreadyStartedError extends Data.TaggedError("ElectionAlreadyStartedError")<{
  readonly lease: string
}> {
  override get message() {
    return `an election named ${this.lease} is already started on this client ` +
      `(locks and elections share one name space per client)`
  }
}

/**
 * The calling fiber (or a fiber it was forked from) already holds the lock: locks are not
 * re-entrant, and waiting for it would wait for ourselves forever.
 */
export class LockReentryError extends Data.TaggedError("LockReentryError")<{
  readonly lease: string
}> {
  override get message() {
    return `lock ${this.lease} is already held by this fiber or a fiber it was forked from (locks are not re-entrant)`
  }
}

/**
 * The store holds the name as another kind of lock, or as a semaphore of another limit, while it has
 * holders or waiters (a read-write lock and a semaphore are different kinds; a plain lock is a
 * read-write lock's write hold). Both are named: `held` as the store keeps it, `asked` as requested.
 */
export class LockConflictError extends Data.TaggedError("LockConflictError")<{
  readonly lease: string
  readonly held: string
  readonly asked: string
}> {
  override get message() {
    return `lock ${this.lease} is held as a ${this.held}; asked for a ${this.asked}`
  }
}

/** The backend in use cannot do what was asked (semaphores and read locks on a store without them). */
export class NotSupportedError extends Data.TaggedError("NotSupportedError")<{
  readonly backend: string
  readonly feature: string
}> {
  override get message() {
    return `the ${this.backend} backend does not support ${this.feature} yet`
  }
}

/** A bad argument of a lock call (a permit count out of range, a limit that is not a whole number). */
export class InvalidLockRequestError extends Data.TaggedError("InvalidLockRequestError")<{
  readonly lease: string
  readonly rule: string
}> {
  override get message() {
    return `invalid request for ${this.lease}: ${this.rule}`
  }
}

/** The client was closed; nothing more can be started on it. */
export class SimbaClosedError extends Data.TaggedError("SimbaClosedError")<{}> {
  override get message() {
    return "the Simba client is closed"
  }
}

export { BackendError } from "./LeaseBackend.js"
export { TermExpiredError } from "./Term.js"
