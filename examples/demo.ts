/**
 * The demo behind `npm start`: three clients (`alpha`, `bravo`, `charlie`) in one process on one
 * in-memory backend, on the real clock with a 3 s lease. Each client
 *   - competes in the election `reporter` and, while it leads, prints a line every second;
 *   - increments a shared counter inside `withLock("counter")`, stamping each write with its fencing
 *     token (a store that refuses stale tokens shows the writes are fenced);
 *   - joins the partition group `jobs` of six partitions and works on the ones it owns.
 * Then the leader stops gracefully (handover through the `released` hint: the next leader starts at
 * once), and a second leader vanishes without a word (its backend calls hang: its own term ends at its
 * local deadline, and the others take over once the backend expires its session). Every `SimbaEvent`
 * is printed on a timeline with the elapsed time.
 */
import { Duration, Effect, Fiber, Ref, Schedule, Stream } from "effect"
import * as Clock from "effect/Clock"
import { formatEvent, LeaseBackend, MemoryBackend, Simba, SimbaTest, type Term } from "simba"

const names = ["alpha", "bravo", "charlie"] as const
type Name = (typeof names)[number]

const main = Effect.gen(function*() {
  const start = yield* Clock.currentTimeMillis
  const elapsed = Effect.map(Clock.currentTimeMillis, (now) => ((now - start) / 1000).toFixed(2).padStart(6))
  const say = (who: string, line: string) =>
    Effect.flatMap(elapsed, (t) => Effect.sync(() => console.log(`${t}s  ${who.padEnd(8)} ${line}`)))

  const shared = yield* MemoryBackend.make
  // A fenced store: it accepts a write only with a token at least as high as the highest it has seen.
  const store = yield* Ref.make({ counter: 0, highestToken: 0n, rejected: 0 })
  const write = (who: Name, term: Term.Term) =>
    Ref.modify(store, (s) =>
      term.token >= s.highestToken
        ? [true, { counter: s.counter + 1, highestToken: term.token, rejected: s.rejected }] as const
        : [false, { ...s, rejected: s.rejected + 1 }] as const
    ).pipe(
      Effect.flatMap((accepted) =>
        Ref.get(store).pipe(
          Effect.flatMap((s) =>
            say(who, `counter -> ${s.counter} with token ${term.token}${accepted ? "" : " REJECTED (stale token)"}`)
          )
        )
      )
    )

  // Each client reaches the shared backend through its own fault link (the test kit's), so the demo
  // can make one vanish: from then on its calls hang, as for a process that froze or lost the network.
  const links = new Map<Name, SimbaTest.FaultyBackend>()
  for (const who of names) links.set(who, yield* SimbaTest.faulty(shared))

  const runClient = (who: Name) =>
    Effect.gen(function*() {
      const simba = yield* Simba.make({ leaseDuration: "3 seconds", renewInterval: "1 second" }).pipe(
        Effect.provideService(LeaseBackend.LeaseBackend, links.get(who)!.backend)
      )
      yield* simba.events.pipe(
        Stream.runForEach((event) => say(who, formatEvent(event))),
        Effect.forkScoped
      )
      yield* simba.runWhileLeader("reporter", (term) =>
        say(who, `leads "reporter" with token ${term.token}`).pipe(
          Effect.zipRight(Effect.repeat(say(who, `reporting (term ${term.token})`), Schedule.spaced("1 second"))),
          Effect.onInterrupt(() => say(who, `stops reporting (term ${term.token} revoked)`))
        )).pipe(Effect.forkScoped)
      yield* simba.partitionGroup("jobs", 6, (partition, term) =>
        say(who, `works on jobs.${partition} (token ${term.token})`).pipe(
          Effect.zipRight(Effect.never),
          Effect.onInterrupt(() => say(who, `hands jobs.${partition} over`))
        )).pipe(Effect.forkScoped)
      yield* simba.withLock("counter", (term) => write(who, term)).pipe(
        Effect.zipRight(Effect.sleep("700 millis")),
        Effect.repeat(Schedule.recurs(2)),
        Effect.catchAll((error) => say(who, `withLock failed: ${error.message}`)),
        Effect.forkScoped
      )
      return simba
    })

  const fibers = new Map<Name, Fiber.RuntimeFiber<void, unknown>>()
  const clients = new Map<Name, Simba.SimbaClient>()
  for (const who of names) {
    const ready = yield* Effect.makeLatch(false)
    const fiber = yield* Effect.gen(function*() {
      clients.set(who, yield* runClient(who))
      yield* ready.open
      yield* Effect.never
    }).pipe(Effect.scoped, Effect.forkDaemon)
    yield* ready.await
    fibers.set(who, fiber)
  }

  const leaderOf = Effect.gen(function*() {
    for (const who of names) {
      const client = clients.get(who)
      if (client === undefined) continue
      const snapshot = yield* client.snapshot
      if (snapshot.elections.some((e) => e.name === "reporter" && e.status === "LEADER")) return who
    }
    return undefined
  })

  yield* Effect.sleep("4 seconds")
  const first = yield* leaderOf
  if (first !== undefined) {
    yield* say("demo", `--- ${first} stops gracefully: handover, then the next leader starts at once ---`)
    yield* Fiber.interrupt(fibers.get(first)!)
    clients.delete(first)
  }

  yield* Effect.sleep("3 seconds")
  const second = yield* leaderOf
  if (second !== undefined) {
    yield* say("demo", `--- ${second} vanishes without a word: its backend calls hang from now on ---`)
    yield* links.get(second)!.faults.pause()
  }

  yield* Effect.sleep("7 seconds")
  const s = yield* Ref.get(store)
  yield* say("demo", `--- done: counter = ${s.counter}, stale writes rejected = ${s.rejected} ---`)
  for (const who of names) {
    const client = clients.get(who)
    if (client === undefined || (second !== undefined && who === second)) continue
    const snapshot = yield* client.snapshot
    const led = snapshot.elections.filter((e) => e.status === "LEADER").map((e) => `${e.name}#${e.token}`)
    yield* say("demo", `${who} leads ${led.join(", ") || "nothing"}`)
  }
  // Close the survivors gracefully; the vanished client is simply abandoned, as a crashed process is.
  for (const [who, fiber] of fibers) {
    if (who !== second && who !== first) yield* Fiber.interrupt(fiber)
  }
  if (second !== undefined) yield* Fiber.interruptFork(fibers.get(second)!)
})

Effect.runPromise(main.pipe(Effect.scoped, Effect.timeout(Duration.seconds(28)))).then(
  () => process.exit(0),
  (error) => {
    console.error(error)
    process.exit(1)
  }
)
