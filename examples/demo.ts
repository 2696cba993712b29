/**
 * The demo behind `npm start`: three clients (alpha, bravo, charlie) on one in-memory backend, on the
 * real clock, in four short scenes. It ends by itself in about ten seconds.
 *
 *   1. An election and a handover: all three compete for "reporter"; the leader stops, and the next
 *      one starts at once (the lease is handed over, nobody waits for it to expire).
 *   2. A lock and a fenced write: alpha writes under the lock, then stalls holding its old term; bravo
 *      takes the lock (a higher token) and writes; alpha's late write is refused by the fenced store.
 *   3. Failing leader work: the first leader of "sync" fails ("db down"); the failure ends its term,
 *      and another client takes over.
 *   4. A leader-only schedule: every 2 s while leading; the first run waits for the first recurrence,
 *      it does not run at the election (a deploy or failover does not rerun a nightly job).
 */
import { Effect, Either, Fiber, Logger, LogLevel, Ref, Schedule } from "effect"
import * as Clock from "effect/Clock"
import { LeaseBackend, MemoryBackend, Simba } from "simba"
// In your app: import * as Fencing from "simba/fencing"
import * as Fencing from "../src/fencing/Fencing.js"

const main = Effect.gen(function*() {
  const start = yield* Clock.currentTimeMillis
  const say = (who: string, line: string) =>
    Effect.flatMap(Clock.currentTimeMillis, (now) =>
      Effect.sync(() => console.log(`${((now - start) / 1000).toFixed(2).padStart(5)}s  ${who.padEnd(8)} ${line}`)))

  // One backend, three clients: as three processes sharing one Redis would be.
  const backend = yield* MemoryBackend.make()
  const names = ["alpha", "bravo", "charlie"] as const
  const clients = yield* Effect.forEach(names, () =>
    Simba.make({ leaseDuration: "3 seconds", renewInterval: "1 second" }).pipe(
      Effect.provideService(LeaseBackend.LeaseBackend, backend)
    ))
  const all = names.map((who, i) => ({ who, client: clients[i]! }))

  yield* say("demo", "--- 1. an election, then a handover ---")
  const elections = yield* Effect.forEach(all, ({ client, who }) =>
    client.election("reporter", {
      work: (term) =>
        say(who, `leads "reporter" (token ${term.token})`).pipe(
          Effect.zipRight(Effect.never),
          Effect.onInterrupt(() => say(who, `stops leading "reporter"`))
        )
    }))
  const leaderOf = Effect.raceAll(elections.map((election, i) => Effect.as(election.awaitLeader, i)))
  const first = yield* leaderOf
  yield* Effect.sleep("500 millis")
  yield* say("demo", `${names[first]} stops: its lease goes straight to the next candidate`)
  yield* elections[first]!.stop
  yield* leaderOf
  yield* Effect.sleep("200 millis")
  yield* Effect.forEach(elections, (election) => election.stop, { discard: true })

  yield* say("demo", "--- 2. a lock and a fenced write ---")
  const store = yield* Fencing.memoryStore
  const write = (who: string, token: bigint) =>
    store.fenced("orders", token, say(who, `wrote orders with token ${token}`)).pipe(Effect.either)
  const [alpha, bravo] = [all[0]!, all[1]!]
  const stale = yield* alpha.client.withLock("orders", (term) => Effect.as(write("alpha", term.token), term))
  yield* say("alpha", `stalls, still holding its term (token ${stale.token})`)
  yield* bravo.client.withLock("orders", (term) => write("bravo", term.token))
  const late = yield* write("alpha", stale.token)
  if (Either.isLeft(late)) yield* say("alpha", `late write REFUSED: ${late.left.message}`)

  yield* say("demo", "--- 3. failing leader work ends the term ---")
  const failures = yield* Ref.make(0)
  const sync = yield* Effect.forEach(all, ({ client, who }) =>
    client.runWhileLeader("sync", (term) =>
      Effect.gen(function*() {
        yield* say(who, `leads "sync" (token ${term.token})`)
        if ((yield* Ref.getAndUpdate(failures, (n) => n + 1)) === 0) {
          yield* say(who, `sync fails: "db down" (the term ends, another client takes over)`)
          return yield* Effect.fail("db down")
        }
        yield* Effect.never
      })).pipe(Effect.fork))
  yield* Effect.sleep("1500 millis")
  yield* Fiber.interruptAll(sync)

  yield* say("demo", "--- 4. a leader-only schedule: the first run waits for its recurrence ---")
  yield* say("demo", "the schedule starts now on every client; only the leader runs it, 2 s after its election")
  const schedules = yield* Effect.forEach(all, ({ client, who }) =>
    client.schedule("report", Schedule.spaced("2 seconds"), (term) => say(who, `scheduled run (token ${term.token})`))
      .pipe(Effect.fork))
  yield* Effect.sleep("4500 millis")
  yield* Fiber.interruptAll(schedules)
  yield* Effect.forEach(clients, (client) => client.close, { discard: true })
  yield* say("demo", "--- done ---")
})

// The clients log their lifecycle at Info; the story above is enough here, so only warnings and errors.
Effect.runPromise(
  main.pipe(Effect.scoped, Logger.withMinimumLogLevel(LogLevel.Warning), Effect.timeout("30 seconds"))
).then(
  () => process.exit(0),
  (error: unknown) => {
    console.error(error)
    process.exit(1)
  }
)
