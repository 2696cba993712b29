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
