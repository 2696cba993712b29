import { describe, expect, it } from "@effect/vitest"
import { Clock, Duration, Effect, Exit, Fiber, Option, Ref, Schedule, Stream } from "effect"
import { ElectionAlreadyStartedError, LeaseBackend, MemoryBackend, Simba, type Term } from "simba"
import type { AcquireReply, BackendError, LeaseBackendService } from "../../src/LeaseBackend.js"
import { advance, config, eventsOf, leading, makeClient, makeClients, settle } from "./helpers.js"

const leaderCount = (clients: ReadonlyArray<{ client: Parameters<typeof leading>[0] }>, name: string) =>
  Effect.map(Effect.forEach(clients, ({ client }) => leading(client, name)), (flags) => flags.filter(Boolean).length)

describe("election", () => {
  it.scoped("exactly one leader among several clients, keeping its lease across many lease durations", () =>
    Effect.gen(function*() {
      const { clients } = yield* makeClients(3)
      const elections = yield* Effect.forEach(clients, ({ client }) => client.election("leader"))
      yield* advance("500 millis")
      expect(yield* leaderCount(clients, "leader")).toBe(1)
      const leaderIndex = (yield* Effect.forEach(elections, (e) => e.status)).indexOf("LEADER")
      const term = Option.getOrThrow(yield* elections[leaderIndex]!.term)
      // Ten lease durations of virtual time, checked every 250 ms: same leader, same token, always valid.
      for (let i = 0; i < 120; i++) {
        yield* advance("250 millis")
        expect(yield* leaderCount(clients, "leader")).toBe(1)
        expect(yield* term.isValid).toBe(true)
        // Renewal never shortens the lease: the term always has more than a renewal period left.
        expect(Duration.toMillis(yield* term.remaining)).toBeGreaterThan(1000)
      }
      expect(Option.getOrThrow(yield* elections[leaderIndex]!.term).token).toBe(term.token)
      const revoked = yield* eventsOf(clients[leaderIndex]!.events, "Revoked")
      expect(revoked).toEqual([])
    }))

  it.scoped("when the leader's client closes, another is elected with a larger token, promptly on the released hint", () =>
    Effect.gen(function*() {
      const { clients } = yield* makeClients(3)
      const elections = yield* Effect.forEach(clients, ({ client }) => client.election("leader"))
      yield* advance("500 millis")
      const statuses = yield* Effect.forEach(elections, (e) => e.status)
      const leaderIndex = statuses.indexOf("LEADER")
      const oldTerm = Option.getOrThrow(yield* elections[leaderIndex]!.term)
      const closedAt = yield* Clock.currentTimeMillis
      yield* clients[leaderIndex]!.client.close
      yield* settle
      const others = clients.filter((_, i) => i !== leaderIndex)
      expect(yield* leaderCount(others, "leader")).toBe(1)
      const elected = (yield* Effect.forEach(others, (c) => eventsOf(c.events, "Elected"))).flat()
      expect(elected).toHaveLength(1)
      expect(elected[0]!.event.token).toBeGreaterThan(oldTerm.token)
      // No time passed at all: the hint, not a retry timer, brought the new leader in.
      expect(elected[0]!.at).toBe(closedAt)
      expect(yield* oldTerm.isValid).toBe(false)
    }))

  it.scoped("a leader whose backend calls hang ends its term with DEADLINE_PASSED before anyone else gets in", () =>
    Effect.gen(function*() {
      const { clients } = yield* makeClients(2)
      const [a, b] = clients as [typeof clients[0], typeof clients[0]]
      const electionA = yield* a.client.election("leader")
      yield* advance("200 millis")
      const electionB = yield* b.client.election("leader")
      yield* advance("200 millis")
      const term = Option.getOrThrow(yield* electionA.term)
      // When B is elected, read A's old term at that very instant.
      const seenAtTakeover = yield* Ref.make<Option.Option<boolean>>(Option.none())
      yield* electionB.terms.pipe(
        Stream.take(1),
        Stream.runForEach(() => Effect.flatMap(term.isValid, (valid) => Ref.set(seenAtTakeover, Option.some(valid)))),
        Effect.forkScoped
      )
      yield* a.hang
      yield* advance("6 seconds", "10 millis")
      const revoked = yield* eventsOf(a.events, "Revoked")
      expect(revoked.map((r) => r.event.reason)).toEqual(["DEADLINE_PASSED"])
      const electedB = yield* eventsOf(b.events, "Elected")
      expect(electedB).toHaveLength(1)
      expect(revoked[0]!.at).toBeLessThan(electedB[0]!.at)
      expect(yield* Ref.get(seenAtTakeover)).toEqual(Option.some(false))
      expect(electedB[0]!.event.token).toBeGreaterThan(term.token)
      expect(yield* term.revoked).toBe("DEADLINE_PASSED")
    }))

  it.scoped("stepDown(cooldown): no candidacy during the cooldown, candidate again after it", () =>
    Effect.gen(function*() {
      const { clients } = yield* makeClients(2)
      const [a, b] = clients as [typeof clients[0], typeof clients[0]]
      const electionA = yield* a.client.election("leader")
      yield* advance("200 millis")
      expect(yield* electionA.status).toBe("LEADER")
      const electionB = yield* b.client.election("leader")
      yield* advance("200 millis")
      yield* electionA.stepDown("5 seconds")
      expect(yield* electionA.status).toBe("COOLDOWN")
      yield* settle
      expect(yield* electionB.status).toBe("LEADER")
      // B leaves at once; A must stay out until its cooldown is over.
      yield* electionB.stop
      const acquiresBefore = (yield* a.calls).filter((c) => c.operation === "acquire").length
      yield* advance("4500 millis")
      expect(yield* electionA.status).toBe("COOLDOWN")
      expect((yield* a.calls).filter((c) => c.operation === "acquire").length).toBe(acquiresBefore)
      yield* advance("700 millis")
      expect(yield* electionA.status).toBe("LEADER")
    }))

  it.scoped("starting a name twice on one client fails with ElectionAlreadyStartedError", () =>
    Effect.gen(function*() {
      const { clients } = yield* makeClients(1)
      const client = clients[0]!.client
      yield* client.election("dup")
      const error = yield* Effect.flip(client.election("dup"))
      expect(error).toBeInstanceOf(ElectionAlreadyStartedError)
      expect(error._tag).toBe("ElectionAlreadyStartedError")
      const lockError = yield* Effect.flip(client.withLock("dup", Effect.void))
      expect(lockError._tag).toBe("ElectionAlreadyStartedError")
    }))

  it.scoped("every Elected is followed by exactly one Revoked, and nothing is delivered after stop completes", () =>
    Effect.gen(function*() {
      const backend = yield* MemoryBackend.make()
      const a = yield* makeClient(backend)
      const b = yield* makeClient(backend)
      const electionA = yield* a.client.election("pairs")
      const electionB = yield* b.client.election("pairs")
      // Flip leadership a few times.
      for (let i = 0; i < 4; i++) {
        yield* advance("300 millis")
        const leader = (yield* electionA.status) === "LEADER" ? electionA : electionB
        yield* leader.stepDown("500 millis")
      }
      yield* electionA.stop
      const countAfterStop = (yield* Ref.get(a.events)).filter((r) =>
        (r.event._tag === "Elected" || r.event._tag === "Revoked") && r.event.name === "pairs"
      ).length
      yield* advance("10 seconds")
      const elected = (yield* eventsOf(a.events, "Elected")).filter((r) => r.event.name === "pairs")
      const revoked = (yield* eventsOf(a.events, "Revoked")).filter((r) => r.event.name === "pairs")
      expect(elected.length).toBeGreaterThan(0)
      expect(elected.length + revoked.length).toBe(countAfterStop)
      expect(revoked.map((r) => r.event.token)).toEqual(elected.map((r) => r.event.token))
      // Strict alternation: Elected(t), Revoked(t), Elected(t'), ...
      const sequence = (yield* Ref.get(a.events))
        .filter((r) => (r.event._tag === "Elected" || r.event._tag === "Revoked") && r.event.name === "pairs")
        .map((r) => r.event._tag)
      sequence.forEach((tag, i) => expect(tag).toBe(i % 2 === 0 ? "Elected" : "Revoked"))
      expect(yield* electionA.status).toBe("STOPPED")
    }))

  it.scoped("no timer or schedule chain survives stop", () =>
    Effect.gen(function*() {
      const { clients } = yield* makeClients(1)
      const client = clients[0]!.client
      const runs = yield* Ref.make(0)
      const fiber = yield* client.schedule("ticker", Schedule.spaced("100 millis"), () => Ref.update(runs, (n) => n + 1))
        .pipe(Effect.fork)
      yield* advance("1 second")
      const whileLeading = yield* Ref.get(runs)
      expect(whileLeading).toBeGreaterThanOrEqual(9)
      yield* Fiber.interrupt(fiber)
      const atStop = yield* Ref.get(runs)
      const acquiresAtStop = (yield* clients[0]!.calls).filter((c) => c.operation === "acquire").length
      yield* advance("10 seconds")
      expect(yield* Ref.get(runs)).toBe(atStop)
      expect((yield* clients[0]!.calls).filter((c) => c.operation === "acquire").length).toBe(acquiresAtStop)
      expect((yield* client.snapshot).elections).toEqual([])
    }))

  it.scoped("awaitLeader and terms: each win is a distinct Term whose token rises", () =>
    Effect.gen(function*() {
      const { clients } = yield* makeClients(1)
      const election = yield* clients[0]!.client.election("terms")
      const seen = yield* Ref.make<ReadonlyArray<Term.Term>>([])
      yield* election.terms.pipe(Stream.runForEach((t) => Ref.update(seen, (all) => [...all, t])), Effect.forkScoped)
      const first = yield* election.awaitLeader.pipe(Effect.fork)
      yield* advance("200 millis")
      const t1 = yield* Fiber.join(first)
      yield* election.stepDown("100 millis")
      yield* advance("500 millis")
      const t2 = Option.getOrThrow(yield* election.term)
      expect(t2).not.toBe(t1)
      expect(t2.token).toBeGreaterThan(t1.token)
      expect(yield* t1.isValid).toBe(false)
      expect(yield* t1.revoked).toBe("STEPPED_DOWN")
      expect((yield* Ref.get(seen)).map((t) => t.token)).toEqual([t1.token, t2.token])
    }))

  it.scoped("terms: a late subscriber sees the current term first, then the later ones; term and awaitLeader agree", () =>
    Effect.gen(function*() {
      const { clients } = yield* makeClients(1)
      const election = yield* clients[0]!.client.election("late-terms")
      expect(yield* election.term).toEqual(Option.none())
      yield* advance("200 millis")
      const t1 = Option.getOrThrow(yield* election.term)
      // Subscribed while leading: the current term comes first, and `awaitLeader` returns it at once.
      expect(yield* election.awaitLeader).toBe(t1)
      const early = yield* Ref.make<ReadonlyArray<Term.Term>>([])
      const late = yield* Ref.make<ReadonlyArray<Term.Term>>([])
      const collect = (into: Ref.Ref<ReadonlyArray<Term.Term>>) =>
        election.terms.pipe(Stream.runForEach((t) => Ref.update(into, (all) => [...all, t])), Effect.forkScoped)
      yield* collect(early)
      yield* settle
      expect(yield* Ref.get(early)).toEqual([t1])
      yield* election.stepDown("100 millis")
      // Between two terms: a new subscriber sees nothing until the next term.
      expect(yield* election.term).toEqual(Option.none())
      yield* collect(late)
      yield* settle
      expect(yield* Ref.get(late)).toEqual([])
      yield* advance("500 millis")
      const t2 = Option.getOrThrow(yield* election.term)
      expect(t2.token).toBeGreaterThan(t1.token)
      expect(yield* Ref.get(early)).toEqual([t1, t2])
      expect(yield* Ref.get(late)).toEqual([t2])
      yield* election.stop
      expect(yield* election.term).toEqual(Option.none())
    }))

  it.scoped("a term revoked in the turn it was won (its work never ran) ends at once: stop does not wait for the deadline", () =>
    Effect.gen(function*() {
      // The first acquire waits until the test lets it through, so the grant and a stop reach the loop
      // together: it elects (forking the work), then stops and interrupts the work before its first
      // step. A fiber interrupted then runs no `ensuring`; the engine must still hear that the work
      // exited, or the stop waits for the handover deadline (forever here: the clock does not move).
      const memory = yield* MemoryBackend.make()
      let letThrough: ((reply: Effect.Effect<AcquireReply, BackendError>) => void) | undefined
      const backend: LeaseBackendService = {
        ...memory,
        acquire: (sessionId, name) =>
          letThrough === undefined
            ? Effect.async<AcquireReply, BackendError>((resume) => {
              letThrough = resume
            })
            : memory.acquire(sessionId, name)
      }
      const client = yield* Simba.make(config).pipe(Effect.provideService(LeaseBackend.LeaseBackend, backend))
      let workRan = false
      const election = yield* client.election("x", {
        work: () => Effect.zipRight(Effect.sync(() => (workRan = true)), Effect.never)
      })
      yield* settle
      const sessionId = (yield* client.snapshot).session.id
      expect(letThrough).toBeDefined()
      expect(sessionId).toBeDefined()
      // Scheduled in this order: the call's fiber (offers the grant, wakes the loop), then the stop.
      letThrough!(memory.acquire(sessionId!, "x"))
      const stopping = yield* Effect.fork(election.stop)
      yield* settle
      expect(yield* Fiber.poll(stopping)).toEqual(Option.some(Exit.void))
      expect(workRan).toBe(false)
      expect(yield* election.status).toBe("STOPPED")
      // Released at once: the store has no holder.
      const outsider = (yield* memory.openSession(Duration.seconds(10))).sessionId
      expect((yield* memory.acquire(outsider, "x"))._tag).toBe("Granted")
    }))
})

