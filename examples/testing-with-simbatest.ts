/**
 * Testing your own leader-only code with `SimbaTest`: no servers, no real waiting.
 *
 *   npx tsx examples/testing-with-simbatest.ts
 *
 * The code under test is `billingJob`: while its client leads `billing`, it writes an invoice run every
 * second to a store, fenced with the term's token. We put three clients on one in-memory network
 * under `TestClock`, then break things the way production does:
 *
 *   1. the leader's process stalls (a long GC or VM pause) past its lease: another client takes
 *      over; when the old leader wakes, its term already reads invalid and its late write is
 *      rejected by the fenced store;
 *   2. the new leader's renewals start failing: it gives up leadership at its local deadline, before
 *      the backend lets anybody else in (no split brain);
 *   3. the backend loses a leader's session early (a failover that lost data): the `released` hint
 *      makes the old leader renew at once and learn its session is gone; the fence rejects the
 *      write it had prepared with its old token.
 *
 * A `recorder` tracks who led when: there never were two leaders at once. In a
 * vitest suite the same code runs in `it.scoped(...)` (which provides `TestClock`); here we provide
 * `TestContext` ourselves. The program exits with status 1 if any check fails.
 */
import { Duration, Effect, Option, Schedule, TestContext } from "effect"
import { type Term } from "simba"
import { SimbaTest } from "simba/test"

/** The code under test: leader-only work that fences every write with its term. */
const billingJob = (store: SimbaTest.FencedStore<string>, who: string) => (term: Term.Term) =>
  Effect.gen(function*() {
    // Cheap local check first (no I/O): skip the run if the term is ending anyway.
    yield* term.ensureValid("200 millis")
    yield* store.write(term, `invoices by ${who}`, who)
  }).pipe(
    Effect.catchTag("TermExpiredError", () => Effect.void),
    Effect.repeat(Schedule.spaced("1 second"))
  )

const check = (label: string, ok: boolean) =>
  Effect.sync(() => {
    console.log(`${ok ? "ok  " : "FAIL"} ${label}`)
    if (!ok) process.exitCode = 1
  })

const program = Effect.gen(function*() {
  const net = yield* SimbaTest.network
  const store = yield* SimbaTest.FencedStore.make<string>()
  const recorder = yield* SimbaTest.recorder
  const config = { leaseDuration: "3 seconds" } as const
  const [alpha, bravo, charlie] = yield* SimbaTest.makeClients(net, 3, config)
  const clients = { alpha: alpha!, bravo: bravo!, charlie: charlie! }

  const elections = {
    alpha: yield* alpha!.client.election("billing", { work: recorder.track("alpha", billingJob(store, "alpha")) }),
    bravo: yield* bravo!.client.election("billing", { work: recorder.track("bravo", billingJob(store, "bravo")) }),
    charlie: yield* charlie!.client.election("billing", { work: recorder.track("charlie", billingJob(store, "charlie")) })
  }
  const leader = Effect.gen(function*() {
    for (const [name, election] of Object.entries(elections)) {
      const term = yield* election.term
      if (Option.isSome(term)) return { name: name as keyof typeof clients, term: term.value }
    }
    return yield* Effect.dieMessage("nobody leads billing")
  })

  const leaderOtherThan = (name: string) =>
    Effect.gen(function*() {
      for (const [other, election] of Object.entries(elections)) {
        const term = yield* election.term
        if (other !== name && Option.isSome(term)) return { name: other as keyof typeof clients, term: term.value }
      }
      return yield* Effect.dieMessage(`nobody but ${name} leads billing`)
    })

  yield* SimbaTest.advance("3 seconds")
  const first = yield* leader
  console.log(`${first.name} leads billing with token ${first.term.token}`)

  // 1. The leader stalls: its backend calls hang (its renewals never arrive).
  console.log(`\n1. ${first.name} stalls for 8 seconds`)
  yield* clients[first.name].faults.pause()
  yield* SimbaTest.advance("8 seconds")
  const second = yield* leader
  console.log(`${second.name} took over with token ${second.term.token}`)
  // The stalled code wakes up and looks at its term before anything else.
  yield* check(`${first.name}'s term reads invalid on its first look`, !(yield* first.term.isValid))
  const late = yield* store.write(first.term, `late invoices by ${first.name}`, first.name)
  yield* check(`${first.name}'s late write with token ${first.term.token} is rejected`, !late)
  yield* clients[first.name].faults.resume

  // 2. The new leader's renewals fail: it must step back at its own deadline.
  console.log(`\n2. ${second.name}'s renewals fail`)
  yield* clients[second.name].faults.fail({ only: "keepAlive" })
  const deadline = Duration.toMillis(yield* second.term.remaining)
  yield* SimbaTest.advance(Duration.millis(deadline))
  const reason = yield* second.term.revokedReason
  yield* check(
    `${second.name} gave up at its deadline (${Math.round(deadline)} ms later): ${Option.getOrElse(reason, () => "-")}`,
    Option.contains(reason, "DEADLINE_PASSED")
  )
  yield* SimbaTest.advance("4 seconds")
  yield* clients[second.name].faults.heal
  const third = yield* leader
  console.log(`${third.name} leads with token ${third.term.token}`)

  // 3. The backend loses the leader's session early (say, a failover that lost data) and hands the
  //    lease to another client. The `released` hint for a name it leads makes the old leader renew
  //    at once, so it learns within a round trip (here: at once) instead of at its next renewal; the
  //    fence still rejects a write it had already prepared with its old token.
  console.log(`\n3. the backend loses ${third.name}'s session early`)
  yield* clients[third.name].faults.expireSession
  yield* SimbaTest.advance("10 millis")
  const fourth = yield* leaderOtherThan(third.name)
  console.log(`${fourth.name} leads with token ${fourth.term.token}`)
  yield* check(
    `${third.name} already knows: ${Option.getOrElse(yield* third.term.revokedReason, () => "-")}`,
    !(yield* third.term.isValid) && Option.contains(yield* third.term.revokedReason, "SESSION_EXPIRED")
  )
  const stale = yield* store.write(third.term, `invoices by ${third.name}`, third.name)
  yield* check(`the fenced store rejects ${third.name}'s late write with token ${third.term.token}`, !stale)

  // The verdict over the whole run.
  console.log("\nwho led when (virtual ms):")
  for (const i of yield* recorder.intervals) {
    console.log(`  ${i.client.padEnd(8)} token ${i.token}  ${i.start} -> ${i.end ?? "now"}`)
  }
  const violations = yield* recorder.violations
  for (const violation of violations) console.log(`  ${SimbaTest.formatViolation(violation)}`)
  yield* check("never two leaders at once, and tokens always rose", violations.length === 0)
  const accepted = (yield* store.accepted).map((w) => w.token)
  const rejected = yield* store.rejected
  console.log(`fenced store: ${accepted.length} writes accepted, ${rejected.length} rejected`)
  yield* check("the store accepted tokens in rising order only", accepted.every((t, i) => i === 0 || t >= accepted[i - 1]!))
  yield* check("it rejected exactly the two stale writes", rejected.length === 2)
})

program.pipe(
  Effect.scoped,
  Effect.provide(TestContext.TestContext),
  Effect.runPromise
).then(
  () => console.log(process.exitCode === 1 ? "\nsome checks failed" : "\nall checks passed"),
  (error) => {
    console.error(error)
    process.exitCode = 1
  }
)
