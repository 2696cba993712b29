/**
 * The session's local deadline as the terms read it. Each session incarnation (the engine's
 * `sessionSeq`) has its own small mutable cell, held by reference by the terms won in it; the shell
 * keeps only the current incarnation's cell. A past incarnation's cell is garbage once its terms are
 * (a map by incarnation kept one entry per session ever opened), and a term of a past session keeps
 * reading that session's final deadline.
 */

/** The local deadline (monotonic millis) of one session incarnation; `-Infinity` until one is known. */
export interface DeadlineCell {
  deadline: number
}

/** The current incarnation and its cell. */
export interface SessionDeadline {
  seq: number
  cell: DeadlineCell
}

/** Before the first session (the engine numbers its first incarnation 1). */
export const make = (): SessionDeadline => ({ seq: 0, cell: { deadline: Number.NEGATIVE_INFINITY } })

/** The `Deadline` command: incarnation `seq`'s local deadline is now `deadline`. */
export const set = (current: SessionDeadline, seq: number, deadline: number): void => {
  if (seq === current.seq) {
    current.cell.deadline = deadline
  } else if (seq > current.seq) {
    current.seq = seq
    current.cell = { deadline }
  }
  // An older incarnation never gets a new deadline: the engine publishes the current one's only.
}

/** The cell a term won in incarnation `seq` reads its deadline from. */
export const cellOf = (current: SessionDeadline, seq: number): DeadlineCell => {
  if (seq === current.seq) return current.cell
  if (seq > current.seq) {
    // Elected before its session's first deadline was published: it will be published into this cell.
    current.seq = seq
    current.cell = { deadline: Number.NEGATIVE_INFINITY }
    return current.cell
  }
  // The engine elects in the current incarnation only; a past one's term would be over anyway.
  return { deadline: Number.NEGATIVE_INFINITY }
}

/** The local deadline of incarnation `seq`, or `unknown` for one that is not the current one. */
export const deadlineOf = (current: SessionDeadline, seq: number, unknown: number): number =>
  seq === current.seq ? current.cell.deadline : unknown
