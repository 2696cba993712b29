/**
 * Semaphores and read-write locks: `withPermits` / `permits`, `withReadLock` / `readLock`, and the
 * write lock (`withWriteLock` / `writeLock`), which is the plain lock of the name.
 *
 * A hold (some permits of a semaphore, one read hold) is a lock on the store under a name of its own
 * (`LeaseName.holdName`: the pool, the mode, the weight and limit, an id no other hold has), so the
 * engine and shell run it exactly as a lock: one term, a fencing token from the pool's counter,
 * revocation as interruption, the release off the caller's path. The store grants it by the pool's
 * rule, in arrival order (docs/design.md, "Semaphores and read-write locks"). To the caller, the
 * term, the errors and re-entrancy name the pool.
 */
import * as Effect from "effect/Effect"
import type * as Scope from "effect/Scope"
import { randomBytes } from "node:crypto"
import { InvalidLeaseNameError, InvalidLockRequestError, NotSupportedError } from "../Errors.js"
import * as LeaseName from "../LeaseName.js"
import type { HoldError, PermitOptions, ReadLockOptions } from "../Simba.js"
import type * as Term from "../Term.js"
import * as Locks from "./locks.js"
import type { Shell } from "./shell.js"

/** Hold ids: this process's random prefix and a counter (a hold name is never asked for twice). */
const processPrefix = randomBytes(6).toString("hex")
let holdsAsked = 0
const nextHoldId = (): string => `${processPrefix}.${(holdsAsked++).toString(36)}`

/** The store name of a hold of `name`, or why there is none. */
const holdLease = (
  shell: Shell,
  name: string,
  hold: Hold
): Effect.Effect<string, HoldError> => {
  const rule = LeaseName.brokenRule(name)
  if (rule !== undefined) return Effect.fail(new InvalidLeaseNameError({ lease: name, rule }))
  if (hold.mode === "permits") {
    const { limit, weight } = hold
    if (!Number.isInteger(limit) || limit < 1 || limit > LeaseName.maxPermits) {
      return Effect.fail(new InvalidLockRequestError({ lease: name, rule: `limit must be a whole number from 1 to ${LeaseName.maxPermits} (got ${limit})` }))
    }
    if (!Number.isInteger(weight) || weight < 1 || weight > limit) {
      return Effect.fail(new InvalidLockRequestError({ lease: name, rule: `permits must be a whole number from 1 to the limit ${limit} (got ${weight})` }))
    }
  }
  if (!shell.backend.holds) {
    return Effect.fail(new NotSupportedError({ backend: shell.backend.backend, feature: hold.mode === "read" ? "read locks" : "semaphores" }))
  }
  return Effect.succeed(LeaseName.holdName({ ...hold, pool: name, id: nextHoldId() }))
}

type HoldOptions = Pick<PermitOptions, "timeout" | "awaitRelease">

/**
 * A hold's lock options: its timeout and `awaitRelease`, and never `keep` (a client's `lockKeep`
 * included): each request is a hold of its own name, so a kept one would only hold its permits for nobody.
 */
const lockOptions = (options: HoldOptions | undefined) => ({ timeout: options?.timeout, awaitRelease: options?.awaitRelease, keep: 0 })

type Hold = Omit<LeaseName.Hold, "pool" | "id">
type Body<A, E, R> = Effect.Effect<A, E, R> | ((term: Term.Term) => Effect.Effect<A, E, R>)

const permitHold = (options: PermitOptions, permits: number): Hold => ({ mode: "permits", weight: permits, limit: options.limit })
const readHold: Hold = { mode: "read", weight: 1, limit: 0 }

/** `withLock` of a hold of `name` (a fresh hold name per call: built when run). */
const withHold = <A, E, R>(shell: Shell, name: string, hold: Hold, options: HoldOptions | undefined, body: Body<A, E, R>) =>
  Effect.flatMap(
    Effect.suspend(() => holdLease(shell, name, hold)),
    (lease) => Locks.withLock(shell, name, body, lockOptions(options), lease)
  )

/** `lock` of a hold of `name`. */
const scopedHold = (shell: Shell, name: string, hold: Hold, options: HoldOptions | undefined) =>
  Effect.flatMap(
    Effect.suspend(() => holdLease(shell, name, hold)),
    (lease) => Locks.lock(shell, name, lockOptions(options), lease)
  )

export const withPermits = <A, E, R>(
  shell: Shell,
  name: string,
  permits: number,
  body: Body<A, E, R>,
  options: PermitOptions
): Effect.Effect<A, E | HoldError, R> => withHold(shell, name, permitHold(options, permits), options, body)

export const permits = (
  shell: Shell,
  name: string,
  permits: number,
  options: PermitOptions
): Effect.Effect<Term.Term, HoldError, Scope.Scope> => scopedHold(shell, name, permitHold(options, permits), options)

export const withReadLock = <A, E, R>(
  shell: Shell,
  name: string,
  body: Body<A, E, R>,
  options?: ReadLockOptions
): Effect.Effect<A, E | HoldError, R> => withHold(shell, name, readHold, options, body)

export const readLock = (
  shell: Shell,
  name: string,
  options?: ReadLockOptions
): Effect.Effect<Term.Term, HoldError, Scope.Scope> => scopedHold(shell, name, readHold, options)
