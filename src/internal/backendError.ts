/**
 * `BackendError`, the one error of the `LeaseBackend` SPI (re-exported there), and how its message
 * reads a chain of causes.
 */
import * as Data from "effect/Data"

/** A backend call failed, timed out or answered something the client cannot read. */
export class BackendError extends Data.TaggedError("BackendError")<{
  readonly backend: string
  readonly operation: string
  readonly cause: unknown
}> {
  /**
   * `<backend> <operation> failed: <reason>`, the reason the innermost cause's text, followed by the
   * wrappers' own in parentheses: `postgres connect failed: role "app" does not exist (PgClient:
   * Failed to connect)`, not the driver's wrapper on top and the reason two causes down.
   */
  override get message() {
    return `${this.backend} ${this.operation} failed: ${describeCause(this.cause)}`
  }
}

/** The text of one error in a chain of causes. */
const textOf = (error: unknown): string => {
  if (!(error instanceof Error)) {
    if (typeof error !== "object" || error === null) return String(error)
    return "message" in error && typeof error.message === "string" ? error.message : ""
  }
  if (error.message !== "") return error.message
  // Node's AggregateError (a connection tried on several addresses) has no message of its own.
  if (error instanceof AggregateError && error.errors.length > 0) return error.errors.map(textOf).join("; ")
  return "code" in error && typeof error.code === "string" ? error.code : error.name
}

/** The reason first (the innermost cause's text), then the texts of the errors that wrap it. */
const describeCause = (cause: unknown): string => {
  const texts: Array<string> = []
  const seen = new Set<unknown>()
  let error: unknown = cause
  while (error !== undefined && error !== null && !seen.has(error)) {
    seen.add(error)
    const text = textOf(error)
    if (text !== "" && !texts.includes(text)) texts.push(text)
    error = typeof error === "object" && "cause" in error ? error.cause : undefined
  }
  if (texts.length === 0) return String(cause)
  const reason = texts.pop()!
  return texts.length === 0 ? reason : `${reason} (${texts.join(": ")})`
}
