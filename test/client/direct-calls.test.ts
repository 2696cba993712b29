/**
 * Backend calls without a fiber (`LeaseBackend.directOf`): a backend that offers the direct form of
 * `acquire`, `release` and `keepAlive` gets them from the client's loop, with a callback for the
 * reply; the direct forms keep the SPI's checks; a hung direct call is answered as failed at its
 * deadline and its late answer dropped; a wrapper that replaces an operation, or an installed tracer,
 * sends the client back to the Effects.
 */
import { describe, expect, it } from "@effect/vitest"
import { Cause, Clock, Duration, Effect, Either, Exit, Runtime, Stream, Tracer } from "effect"
import { LeaseBackend, MemoryBackend, Simba } from "simba"
import { advance, settle } from "./helpers.js"

type Counted = "keepAlive" | "acquire" | "release"

/**
 * A store on a memory backend whose three hot operations exist in both forms, each counted; a direct
 * `keepAlive` can be made to hang (its callbacks kept, to be answered late by the test).
 */
const countingStore = Effect.gen(function*() {
  const memory = yield* MemoryBackend.make()
  const runCallback = Runtime.runCallback(yield* Effect.runtime<never>())
  const effects: Record<Counted, number> = { keepAlive: 0, acquire: 0, release: 0 }
  const directs: Record<Counted, number> = { keepAlive: 0, acquire: 0, release: 0 }
  const runSync = Runtime.runSync(yield* Effect.runtime<never>())
  const hung: Array<{
    readonly sentAt: number
    readonly done: (answer: Either.Either<LeaseBackend.KeepAliveReply, unknown>) => void
  }> = []
  let hangRenewals = false
  /** Runs `effect` on the test's runtime (its TestClock) and answers `done` with its outcome. */
  const answer = <A, E>(effect: Effect.Effect<A, E>, done: (answer: Either.Either<A, unknown>) => void) =>
    void runCallback(effect, {
      onExit: (exit) => done(Exit.isSuccess(exit) ? Either.right(exit.value) : Either.left(Cause.squash(exit.cause)))
    })
  const store: LeaseBackend.Store = {
    backend: "counted",
    openSession: (ttl) => memory.openSession(Duration.millis(ttl)),
    keepAlive: (sessionId, ttl, known) => {
      effects.keepAlive++
      return memory.keepAlive(sessionId, Duration.millis(ttl), known)
    },
    closeSession: memory.closeSession,
    acquire: (sessionId, name) => {
      effects.acquire++
      return memory.acquire(sessionId, name)
    },
    release: (sessionId, name, token) => {
      effects.release++
      return memory.release(sessionId, name, token)
    },
    withdraw: memory.withdraw,
    join: memory.join,
    leave: memory.leave,
    members: memory.members,
    hints: memory.hints,
    direct: {
      keepAlive: (sessionId, ttl, known, done) => {
        directs.keepAlive++
        if (hangRenewals) hung.push({ sentAt: runSync(Clock.currentTimeMillis), done })
        else answer(memory.keepAlive(sessionId, Duration.millis(ttl), known), done)
      },
      acquire: (sessionId, name, reserve, done) => {
        directs.acquire++
        answer(memory.acquire(sessionId, name, reserve), done)
      },
      release: (sessionId, name, token, done) => {
        directs.release++
        answer(memory.release(sessionId, name, token), done)
      }
    }
  }
  return {
    backend: LeaseBackend.make(store),
    effects,
    directs,
    hung,
    hangRenewals: (on: boolean) => {
      hangRenewals = on
    }
  }
})

const clientOf = (backend: LeaseBackend.LeaseBackendService) =>
  Simba.make({ leaseDuration: "3 seconds" }).pipe(Effect.provideService(LeaseBackend.LeaseBackend, backend), Effect.orDie)

/** A tracer that records nothing: installed, it is not Effect's default one. */
const otherTracer = Tracer.make({
  span: (name, parent, context, links, startTime, kind) => {
    const span: Tracer.Span = {
      _tag: "Span",
      name,
      spanId: "span",
      traceId: "trace",
      parent,
      context,
      status: { _tag: "Started", startTime },
      attributes: new Map(),
      links,
      sampled: true,
      kind,
      end: () => undefined,
      attribute: () => undefined,
      event: () => undefined,
      addLinks: () => undefined
    }
    return span
  },
  context: (f) => f()
})

describe("backend calls without a fiber", () => {
  it.scoped("the client sends acquires, releases and renewals through the direct forms", () =>
    Effect.gen(function*() {
      const store = yield* countingStore
      const client = yield* clientOf(store.backend)
      yield* advance("100 millis")
      expect(yield* client.withLock("direct", Effect.succeed("ran"))).toBe("ran")
      yield* advance("2500 millis")
      expect(store.directs.acquire).toBe(1)
      expect(store.directs.release).toBe(1)
      expect(store.directs.keepAlive).toBeGreaterThanOrEqual(2)
      expect(store.effects).toEqual({ keepAlive: 0, acquire: 0, release: 0 })
    }))

  it.scoped("with a tracer installed the client calls the Effects (each call gets its span)", () =>
    Effect.gen(function*() {
      const store = yield* countingStore
      const client = yield* clientOf(store.backend).pipe(Effect.withTracer(otherTracer))
      yield* advance("100 millis")
      yield* client.withLock("traced", Effect.void)
      yield* advance("2500 millis")
      expect(store.directs).toEqual({ keepAlive: 0, acquire: 0, release: 0 })
      expect(store.effects.acquire).toBe(1)
      expect(store.effects.keepAlive).toBeGreaterThanOrEqual(2)
    }))

  it.scoped("a wrapper that replaces an operation replaces its direct form: the client calls the wrapper", () =>
    Effect.gen(function*() {
      const store = yield* countingStore
      let wrapped = 0
      const wrapper: LeaseBackend.LeaseBackendService = {
        ...store.backend,
        acquire: (sessionId, name) => Effect.zipRight(Effect.sync(() => wrapped++), store.backend.acquire(sessionId, name))
      }
      const direct = LeaseBackend.directOf(wrapper, yield* Effect.tracer)
      expect(direct?.acquire).toBeUndefined()
      expect(direct?.release).toBeDefined()
      const client = yield* clientOf(wrapper)
      yield* advance("100 millis")
      yield* client.withLock("wrapped", Effect.void)
      yield* settle
      expect(wrapped).toBe(1)
      expect(store.directs.acquire).toBe(0)
      expect(store.directs.release).toBe(1)
    }))

  it.scoped("a hung direct renewal fails exactly one renew interval after it was sent; its late answer is dropped", () =>
    Effect.gen(function*() {
      const store = yield* countingStore
      const client = yield* clientOf(store.backend)
      const failed: Array<{ readonly at: number; readonly operation: string; readonly error: string }> = []
      yield* client.events.pipe(
        Stream.runForEach((event) =>
          event._tag === "BackendFailed"
            ? Effect.map(Clock.currentTimeMillis, (at) => void failed.push({ at, operation: event.operation, error: event.error }))
            : Effect.void
        ),
        Effect.forkScoped
      )
      yield* advance("100 millis")
      store.hangRenewals(true)
      yield* advance("1000 millis", "50 millis")
      expect(store.hung).toHaveLength(1)
      yield* advance("1500 millis", "50 millis")
      expect(failed.filter((f) => f.operation === "keepAlive")).toHaveLength(1)
      expect(failed[0]!.at - store.hung[0]!.sentAt).toBe(1000)
      expect(failed[0]!.error).toContain("timed out after 1000 ms")
      // The late answer of the timed-out call is dropped; the client renews again and stays open.
      store.hangRenewals(false)
      const sent = store.directs.keepAlive
      store.hung[0]!.done(Either.left(new Error("late")))
      yield* advance("2000 millis")
      expect(store.directs.keepAlive).toBeGreaterThan(sent)
      expect(failed.filter((f) => f.operation === "keepAlive")).toHaveLength(1)
      expect((yield* client.snapshot).session.status).toBe("LIVE")
    }))

  it.scoped("the direct forms keep the SPI's checks: names, sessions, tokens, lease lists, throws, one answer", () =>
    Effect.gen(function*() {
      const store = yield* countingStore
      const direct = LeaseBackend.directOf(store.backend, yield* Effect.tracer)!
      const context = { clock: yield* Effect.clock, metricLabels: [] }
      const answers: Array<Either.Either<unknown, LeaseBackend.BackendError>> = []
      const record = (answer: Either.Either<unknown, LeaseBackend.BackendError>) => void answers.push(answer)
      const errorOf = (i: number) => Either.getLeft(answers[i]!).pipe((e) => e._tag === "Some" ? e.value.message : "")
      direct.acquire!(context, "session", "bad name!", 1, record)
      direct.release!(context, "session", "ok", 0n, record)
      direct.keepAlive!(context, "session", Number.NaN, undefined, record)
      expect(errorOf(0)).toContain("invalid name")
      expect(answers[1]).toEqual(Either.void)
      expect(errorOf(2)).toContain("ttl must be a finite duration")
      // None of the three reached the store.
      expect(store.directs).toEqual({ keepAlive: 0, acquire: 0, release: 0 })

      // A store's direct form that throws, that answers twice, that omits a lease list it must send.
      const odd = LeaseBackend.make({
        ...(yield* MemoryBackend.make()),
        backend: "odd",
        openSession: () => Effect.die("unused"),
        keepAlive: () => Effect.die("unused"),
        release: () => Effect.die("unused"),
        acquire: () => Effect.die("unused"),
        direct: {
          acquire: () => {
            throw new Error("driver threw")
          },
          release: (_sessionId, _name, _token, done) => {
            done(Either.void)
            done(Either.left(new Error("second answer")))
          },
          keepAlive: (_sessionId, _ttl, _known, done) =>
            done(Either.right(LeaseBackend.KeepAliveReply.Live({
              remaining: Duration.seconds(3),
              version: "7",
              leases: undefined,
              groups: []
            })))
        }
      })
      const oddDirect = LeaseBackend.directOf(odd, yield* Effect.tracer)!
      answers.length = 0
      oddDirect.acquire!(context, "session", "ok", 1, record)
      oddDirect.release!(context, "session", "ok", 1n, record)
      oddDirect.keepAlive!(context, "session", 3000, "6", record)
      expect(answers).toHaveLength(3)
      expect(errorOf(0)).toBe("odd acquire failed: driver threw")
      expect(answers[1]).toEqual(Either.void)
      expect(errorOf(2)).toContain("omits the lease list of version 7")
    }))
})
