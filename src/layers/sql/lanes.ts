/**
 * Connections the backend reserves from its own pool and keeps for its lifetime ("lanes"), so a
 * routine call is the driver's query and nothing more. Through `sql.unsafe` every call also takes a
 * connection from the pool and gives it back, compiles a statement and opens a span: measured here on
 * PostgreSQL, 220-400 µs of client CPU per call against 115 µs on a reserved connection, more than the
 * routine's own time on the server. A lane whose call failed or was interrupted is set aside at once
 * (another is reserved when needed) and given back to the pool only once a probe sent on it after the
 * failed call has been answered, that is once the failed call is over: a statement the driver could
 * not cancel (MySQL), or one whose connection went silent (a partition), keeps running on it, and a
 * connection given back meanwhile would hold every later caller behind it. A connection that never
 * answers is never given back, as the pool itself never takes back a connection whose query has not
 * ended.
 */
import type * as SqlClient from "@effect/sql/SqlClient"
import type { Connection } from "@effect/sql/SqlConnection"
import * as Effect from "effect/Effect"
import * as Exit from "effect/Exit"
import * as Scope from "effect/Scope"

/** Runs statements on reserved connections, at most `size` at once. */
export interface Lanes {
  readonly run: (statement: string, params: ReadonlyArray<unknown>) => Effect.Effect<ReadonlyArray<unknown>, unknown>
}

interface Lane {
  readonly connection: Connection
  readonly scope: Scope.CloseableScope
}

/** What waits for a slot: resumed by `give` once the slot is its own. */
interface SlotWaiter {
  readonly resume: (effect: Effect.Effect<void>) => void
  granted: boolean
}

/**
 * `size` slots, served in arrival order, without a turn of the scheduler when one is free: the call's
 * statement is on the wire before the caller's fiber yields. (Effect's `Semaphore` waits for a turn
 * even with permits free, so a hand-over's release went out after its step's other commands and the
 * holder's closing work, 0.2-0.5 ms late; and a woken waiter reaches its permit one hop after a new
 * caller does, so a steady stream of calls started by replies could keep passing an older one.) A
 * freed slot goes straight to the oldest waiter, never back to the pool while one waits.
 */
const makeSlots = (size: number) => {
  let free = size
  const waiters: Array<SlotWaiter> = []
  const give = (): void => {
    const next = waiters.shift()
    if (next === undefined) {
      free++
      return
    }
    next.granted = true
    next.resume(Effect.void)
  }
  /** Takes a slot; `restore` (of the caller's uninterruptible region) makes the wait interruptible. */
  const take = (restore: <A, E, R>(effect: Effect.Effect<A, E, R>) => Effect.Effect<A, E, R>): Effect.Effect<void> =>
    Effect.suspend(() => {
      if (free > 0 && waiters.length === 0) {
        free--
        return Effect.void
      }
      let waiter: SlotWaiter | undefined
      const wait = Effect.async<void>((resume) => {
        const entry: SlotWaiter = { resume, granted: false }
        waiter = entry
        waiters.push(entry)
        return Effect.sync(() => {
          const at = waiters.indexOf(entry)
          if (at >= 0) waiters.splice(at, 1)
        })
      })
      // Interrupted after the slot was handed over (before it could be used): it goes on to the next.
      return Effect.onExit(restore(wait), (exit) =>
        Exit.isFailure(exit) && waiter?.granted === true ? Effect.sync(give) : Effect.void)
    })
  return { take, give }
}

/**
 * Lanes on `sql`, at most `size` (callers beyond it wait for one, in arrival order), reserved on
 * first need and given back when `scope` closes. The pool must keep connections for everything else
 * the backend sends (migrations, `inspect`, `withdraw`): `size` below its size.
 */
export const make = (sql: SqlClient.SqlClient, size: number): Effect.Effect<Lanes, never, Scope.Scope> =>
  Effect.gen(function*() {
    const slots = makeSlots(size)
    const scope = yield* Effect.scope
    // Touched only inside Effect.sync/suspend: the idle lanes, and the lanes in use or idle (not those set aside).
    const idle: Array<Lane> = []
    const open = new Set<Lane>()
    const giveBack = (lane: Lane) =>
      Effect.suspend(() => {
        open.delete(lane)
        return Scope.close(lane.scope, Exit.void)
      })
    yield* Effect.addFinalizer(() => Effect.suspend(() => Effect.forEach([...open], giveBack, { discard: true })))
    /** After a failed call: given back once a probe behind it is answered (failed or not); never while it hangs. */
    const setAside = (lane: Lane) =>
      Effect.suspend(() => {
        open.delete(lane)
        return lane.connection.execute("SELECT 1", [], undefined).pipe(
          Effect.exit,
          Effect.zipRight(Scope.close(lane.scope, Exit.void)),
          Effect.forkIn(scope),
          Effect.asVoid
        )
      })
    const reserve = Effect.gen(function*() {
      const scope = yield* Scope.make()
      const connection = yield* Effect.onError(Scope.extend(sql.reserve, scope), () => Scope.close(scope, Exit.void))
      const lane: Lane = { connection, scope }
      open.add(lane)
      return lane
    })
    const take = Effect.suspend(() => {
      const lane = idle.pop()
      return lane === undefined ? reserve : Effect.succeed(lane)
    })
    const onLane = (statement: string, params: ReadonlyArray<unknown>) =>
      Effect.flatMap(take, (lane) =>
        lane.connection.execute(statement, params, undefined).pipe(
          Effect.onExit((exit) => Exit.isSuccess(exit) ? Effect.sync(() => idle.push(lane)) : setAside(lane))
        ))
    const run = (statement: string, params: ReadonlyArray<unknown>) =>
      Effect.uninterruptibleMask((restore) =>
        Effect.zipRight(slots.take(restore), Effect.ensuring(restore(onLane(statement, params)), Effect.sync(slots.give)))
      )
    return { run }
  })
