/**
 * The exit statuses of the `simba` command (sysexits where one fits) and how every failure maps to
 * one, with the line printed on stderr.
 */
import * as ConfigError from "effect/ConfigError"
import * as Data from "effect/Data"

/** `simba lock`: the lock was not acquired within `--timeout` (a `--timeout 0` try that found it held). */
export const notAcquired = 75
/** `simba lock`: the lock was lost while the command ran; the command was stopped. */
export const lockLost = 76
/** Invalid configuration or arguments (sysexits `EX_CONFIG`). */
export const badConfiguration = 78
/** The backend cannot be reached (sysexits `EX_UNAVAILABLE`). */
export const unavailable = 69
/** An error of `simba` itself (sysexits `EX_SOFTWARE`). */
export const internalError = 70
/** The command was not found (as shells and `timeout(1)` report it). */
export const commandNotFound = 127
/** The command was found but could not be run (not executable). */
export const commandNotRunnable = 126

/** Bad arguments or configuration the `simba` command found itself. */
export class UsageError extends Data.TaggedError("UsageError")<{ readonly text: string }> {
  override get message() {
    return this.text
  }
}

/** The backend did not answer a first call within the time allowed. */
export class UnreachableError extends Data.TaggedError("UnreachableError")<{
  readonly backend: string
  readonly cause: unknown
}> {
  override get message() {
    const reason = typeof this.cause === "object" && this.cause !== null && "message" in this.cause
      ? String(this.cause.message)
      : String(this.cause)
    return `cannot reach the ${this.backend} backend: ${reason}`
  }
}

/** The exit status and the stderr line (without the `simba: ` prefix) for a failure. */
export const ofFailure = (error: unknown): { readonly status: number; readonly text: string } => {
  // The environment itself could not be read (a variable's text never fails: its rule does, above).
  if (ConfigError.isConfigError(error)) return { status: badConfiguration, text: `invalid configuration: ${String(error)}` }
  const text = error instanceof Error ? error.message : String(error)
  const tag = typeof error === "object" && error !== null && "_tag" in error ? error._tag : undefined
  switch (tag) {
    case "LockTimeoutError":
      return { status: notAcquired, text }
    case "LockLostError":
      return { status: lockLost, text }
    case "UsageError":
    case "SimbaConfigError":
    case "InvalidLeaseNameError":
    case "EvictionPolicyError":
      return { status: badConfiguration, text }
    case "BackendError": {
      // The backend's driver is not installed: a setup to fix, not a store that is down.
      const operation = typeof error === "object" && error !== null && "operation" in error ? error.operation : undefined
      return { status: operation === "loadDriver" ? badConfiguration : unavailable, text }
    }
    case "UnreachableError":
      return { status: unavailable, text }
    case "SpawnError": {
      const code = typeof error === "object" && error !== null && "code" in error ? error.code : undefined
      return { status: code === "ENOENT" ? commandNotFound : commandNotRunnable, text }
    }
    default:
      return { status: internalError, text }
  }
}
