/**
 * Lease and group names: 1–128 characters of `[A-Za-z0-9._:-]`, not `.` or `..`, so the same name is a
 * valid Redis key part, ZooKeeper path segment and SQL value. Checked before anything reaches a backend.
 */
import * as Effect from "effect/Effect"
import { InvalidLeaseNameError } from "./Errors.js"

const allowed = /^[A-Za-z0-9._:-]+$/

/** The rule `name` breaks, or `undefined` when it is a valid lease name. */
export const brokenRule = (name: string): string | undefined => {
  if (typeof name !== "string") return "must be a string"
  if (name.length === 0) return "must not be empty"
  if (name.length > 128) return `must be at most 128 characters (got ${name.length})`
  if (!allowed.test(name)) return "may contain only the characters [A-Za-z0-9._:-]"
  if (name === "." || name === "..") return "must not be '.' or '..'"
  return undefined
}

/** Succeeds with `name` when valid, fails with `InvalidLeaseNameError` naming the broken rule. */
export const validate = (name: string): Effect.Effect<string, InvalidLeaseNameError> => {
  const rule = brokenRule(name)
  return rule === undefined ? Effect.succeed(name) : Effect.fail(new InvalidLeaseNameError({ lease: name, rule }))
}

/** The lease name of partition `partition` of group `group`. */
export const partitionName = (group: string, partition: number): string => `${group}.${partition}`

// ---------------------------------------------------------------------------------------------------
// Hold names: the lease names of semaphore permits and read holds
// ---------------------------------------------------------------------------------------------------

/**
 * A hold: one grant of `weight` permits of the semaphore `pool` (`limit` permits in all), or one read
 * hold of the read-write lock `pool` (whose write hold is the plain lock `pool`). On the SPI a hold is
 * a lease of its own, named `holdName(hold)`: granted, renewed with its session, listed, released and
 * handed on as any lease, with a token from `pool`'s counter; only the rule that grants it is the
 * pool's (`docs/design.md`, "Semaphores and read-write locks").
 */
export interface Hold {
  readonly pool: string
  readonly mode: "read" | "permits"
  /** Permits held (1 for a read hold). */
  readonly weight: number
  /** The semaphore's permits in all (0 for a read hold). */
  readonly limit: number
  /** Unique among the holds any client asks for: `[A-Za-z0-9.]`, 1 to 40 characters. */
  readonly id: string
}

/** The largest `limit` of a semaphore. */
export const maxPermits = 1_000_000

/** Joins a hold name's parts: not in the lease name alphabet, so no lease name is a hold name. */
const separator = "~"
const holdId = /^[A-Za-z0-9.]{1,40}$/
const wholeNumber = /^[1-9][0-9]{0,6}$/

/** The lease name of `hold`: `pool~r~id` or `pool~p~weight~limit~id`. */
export const holdName = (hold: Hold): string =>
  hold.mode === "read"
    ? [hold.pool, "r", hold.id].join(separator)
    : [hold.pool, "p", hold.weight, hold.limit, hold.id].join(separator)

/** The hold `name` stands for, or `undefined` when it is not a well-formed hold name. */
export const parseHold = (name: string): Hold | undefined => {
  const parts = name.split(separator)
  const [pool = "", mode] = parts
  if (brokenRule(pool) !== undefined) return undefined
  if (mode === "r" && parts.length === 3 && holdId.test(parts[2]!)) {
    return { pool, mode: "read", weight: 1, limit: 0, id: parts[2]! }
  }
  if (mode !== "p" || parts.length !== 5 || !wholeNumber.test(parts[2]!) || !wholeNumber.test(parts[3]!)) return undefined
  const weight = Number(parts[2])
  const limit = Number(parts[3])
  if (limit > maxPermits || weight > limit || !holdId.test(parts[4]!)) return undefined
  return { pool, mode: "permits", weight, limit, id: parts[4]! }
}

/** Whether `name` is a hold's (it carries the separator no lease name can). */
export const isHoldName = (name: string): boolean => name.includes(separator)

/** The lock or semaphore a lease name belongs to: the name itself, or a hold's pool. */
export const poolOf = (name: string): string => {
  const at = name.indexOf(separator)
  return at < 0 ? name : name.slice(0, at)
}

/** The rule a name on the SPI breaks: a lease name's, unless it is a well-formed hold name. */
export const brokenSpiRule = (name: string): string | undefined =>
  typeof name === "string" && isHoldName(name) && parseHold(name) !== undefined ? undefined : brokenRule(name)
