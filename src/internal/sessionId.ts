/**
 * The session ids the memory, Redis and SQL backends issue: 128 random bits as 32 lowercase hex.
 * Depends on nothing of the client: the backends import it.
 */
import * as Arr from "effect/Array"
import * as Effect from "effect/Effect"
import * as Random from "effect/Random"

/** The form of a session id, as a regular expression source (to embed in a larger pattern). */
export const sessionIdSource = "[0-9a-f]{32}"

const sessionIdPattern = new RegExp(`^${sessionIdSource}$`)

/** Whether `sessionId` has the form of an issued id: other ids name no session, without a round trip. */
export const isSessionId = (sessionId: string): boolean => sessionIdPattern.test(sessionId)

const hex = (words: ReadonlyArray<number>): string => words.map((word) => word.toString(16).padStart(8, "0")).join("")

/** A new id from the platform's cryptographic random source (Web Crypto `getRandomValues`). */
export const newSessionId = (): string => hex(Array.from(globalThis.crypto.getRandomValues(new Uint32Array(4))))

/**
 * A new id from Effect's `Random` (four 32-bit draws): reproducible under a seeded `Random`, so the
 * caller must check it against the ids it already issued.
 */
export const randomSessionId: Effect.Effect<string> = Effect.map(
  Effect.all(Arr.replicate(Random.nextIntBetween(0, 0x1_0000_0000), 4)),
  hex
)
