/**
 * The session model's pure arithmetic: local deadlines and renewal timing (docs/design.md, "Sessions" and "Local deadlines").
 * All times are milliseconds on the client's monotonic clock; `remaining` values are durations on
 * the backend's clock.
 */

/** Timing settings the engine needs, in milliseconds. */
export interface Timing {
  readonly leaseDuration: number
  readonly renewInterval: number
  readonly drift: number
  readonly margin: number
  readonly retryJitter: number
  readonly minBackoff: number
  /**
   * The `remaining` the backend answers when the store granted the whole `leaseDuration` asked, for a
   * backend whose own rule proves less (ZooKeeper: 5/12 of the session timeout): a shortened renewal
   * cadence is then reported (`SessionLeaseShortened`) only for a grant below it. Unset: always.
   */
  readonly fullGrant?: number | undefined
}

/**
 * The local deadline of a reply: `sentAt + remaining × (1 − drift) − margin`. Counting from when the
 * request was *sent* is the worst case (the backend started counting somewhere between send and
 * receive), `1 − drift` covers a client clock slower than the backend's, `margin` is extra safety.
 */
export const localDeadline = (timing: Timing, sentAt: number, remaining: number): number =>
  sentAt + remaining * (1 - timing.drift) - timing.margin

/** How much local validity a grant of `remaining` gives (the deadline minus the send time). */
export const localValidity = (timing: Timing, remaining: number): number =>
  remaining * (1 - timing.drift) - timing.margin

/**
 * The renewal period for a session granted `remaining`: `renewInterval`, unless two renewals at that
 * period no longer fit in the granted local validity, in which case every third of that validity.
 */
export const renewEvery = (timing: Timing, remaining: number): { readonly every: number; readonly shortened: boolean } => {
  const validity = localValidity(timing, remaining)
  return timing.renewInterval * 2 > validity
    ? { every: Math.max(1, validity / 3), shortened: true }
    : { every: timing.renewInterval, shortened: false }
}

/**
 * Delay before retrying a failed renewal: half the time left to the deadline, capped at the renewal
 * period, floored at `minBackoff`.
 */
export const renewalBackoff = (timing: Timing, now: number, deadline: number, every: number): number =>
  Math.max(timing.minBackoff, Math.min(every, (deadline - now) / 2))

/** Delay before a candidate's next try: `renewInterval / 2 + jitter`, `random` in [0, 1). */
export const candidateRetry = (timing: Timing, random: number): number =>
  timing.renewInterval / 2 + random * timing.retryJitter

/**
 * When the holder's lease will have run out, as seen from here: `remaining` was measured on the
 * backend's clock some time after `sentAt`, so stretch it by `drift` and add a little jitter.
 */
export const afterHolderExpiry = (timing: Timing, sentAt: number, remaining: number, random: number): number =>
  sentAt + remaining * (1 + timing.drift) + 1 + random * Math.min(timing.minBackoff, timing.retryJitter) / 4
