/**
 * A client that loses and reopens its session many times keeps nothing per session. Found in issue
 * 7: the shell kept each session incarnation's deadline in a map by incarnation, never dropped (an
 * entry per session ever opened). Now each incarnation's deadline is a cell its terms hold and the
 * shell keeps only the current one: after 1,000 sessions, the registries hold what one session
 * needs, and the cells of the past sessions have been collected. (The client's structures are
 * checked rather than the heap: the in-memory backend itself records every session id it issued.)
 *
 * TestClock and the in-memory backend: the test ends each session on the backend (as after a
 * failover that lost it); the `released` hint makes the leader renew at once, learn that its session
 * expired, revoke its term, open a new session and win again.
 */
import { describe, expect, it } from "@effect/vitest"
import { Effect, Ref, Stream, TestClock } from "effect"
import { setFlagsFromString } from "node:v8"
import { runInNewContext } from "node:vm"
import { LeaseBackend, MemoryBackend } from "simba"
import * as Client from "../../src/internal/client.js"
import type { DeadlineCell } from "../../src/internal/sessionDeadline.js"
import * as Shell from "../../src/internal/shell.js"
import { advance, config, settle } from "./helpers.js"

setFlagsFromString("--expose-gc")
const gc = runInNewContext("gc") as () => void

const SESSIONS = 1_000

/** Lets the event loop turn (so no object is kept alive for the current job only), then collects. */
const collect = Effect.promise(() => new Promise<void>((resolve) => setImmediate(resolve))).pipe(
  Effect.zipRight(Effect.sync(() => {
    gc()
    gc()
  }))
)

describe("session churn", () => {
  it.scoped(`a client that loses and reopens its session ${SESSIONS} times keeps nothing per session`, () =>
    Effect.gen(function*() {
      const backend = yield* MemoryBackend.make()
      const { client, shell } = yield* Client.makeWithShell(config).pipe(
        Effect.provideService(LeaseBackend.LeaseBackend, backend),
        Effect.orDie
      )
      const opened = yield* Ref.make(0)
      yield* client.events.pipe(
        Stream.runForEach((event) => event._tag === "SessionOpened" ? Ref.update(opened, (n) => n + 1) : Effect.void),
        Effect.forkScoped
      )
      const election = yield* client.election("churn")
      yield* advance("200 millis")

      /** Waits until this client leads on a session other than `previous` (no lease decision needs time here). */
      const leadsAgain = (previous: string) =>
        Effect.gen(function*() {
          for (let attempt = 0; attempt < 100; attempt++) {
            yield* settle
            const snapshot = yield* client.snapshot
            const id = snapshot.session.id
            if (id !== undefined && id !== previous && snapshot.elections[0]?.status === "LEADER") return
            yield* TestClock.adjust("10 millis")
          }
          return yield* Effect.dieMessage(`no new term after losing session ${previous}`)
        })

      const pastCells: Array<WeakRef<DeadlineCell>> = []
      for (let i = 0; i < SESSIONS; i++) {
        const session = (yield* client.snapshot).session.id!
        pastCells.push(new WeakRef(shell.deadline.cell))
        yield* backend.closeSession(session)
        yield* leadsAgain(session)
      }

      expect(yield* Ref.get(opened)).toBe(SESSIONS + 1)
      expect(yield* election.status).toBe("LEADER")
      // What one session with one election needs: its hook, its term, a few timers and calls.
      const sizes = Shell.sizes(shell)
      expect(sizes).toMatchObject({ hooks: 1, groupHooks: 0, completions: 0, terms: 1 })
      expect(sizes.timers).toBeLessThanOrEqual(4)
      expect(sizes.callsInFlight).toBeLessThanOrEqual(2)
      // The shell keeps the current session's deadline cell only; the past ones went with their terms.
      yield* collect
      const retained = pastCells.filter((cell) => cell.deref() !== undefined).length
      expect(retained).toBe(0)
      expect(shell.deadline.cell.deadline).toBeGreaterThan(0)
    }), 120_000)
})
