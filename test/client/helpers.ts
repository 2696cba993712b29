/**
 * Helpers for the TestClock client tests: clients sharing one in-memory backend, each behind its own
 * SimbaTest fault link (so a test can make its calls hang: a vanished or partitioned process), and
 * event recorders.
 */
import { Clock, Duration, Effect, Ref, Stream, TestClock } from "effect"
import type { Scope } from "effect"
import { LeaseBackend, MemoryBackend, Simba, type SimbaClient, type SimbaEvent } from "simba"
import { SimbaTest } from "simba/test"
import type { SimbaConfigInput } from "../../src/SimbaConfig.js"

export interface Recorded {
  readonly at: number
  readonly event: SimbaEvent
}

export interface TestClient {
  readonly client: SimbaClient
  /** Every event this client published, with the virtual time. */
  readonly events: Ref.Ref<ReadonlyArray<Recorded>>
  /** Backend calls this client made, in order. */
  readonly calls: Effect.Effect<ReadonlyArray<SimbaTest.CallRecord>>
  /** From now on every backend call of this client hangs (the process vanished or is partitioned). */
  readonly hang: Effect.Effect<void>
  /** Every fault of its link (SimbaTest), for finer ones than `hang`. */
  readonly faults: SimbaTest.Faults
}

export const config: SimbaConfigInput = { leaseDuration: "3 seconds" }

/** A client on `backend`, behind its own fault link (SimbaTest), with its events recorded. */
export const makeClient = (
  backend: LeaseBackend.LeaseBackendService,
  options: SimbaConfigInput = config
): Effect.Effect<TestClient, never, Scope.Scope> =>
  Effect.gen(function*() {
    const link = yield* SimbaTest.faulty(backend)
    const client = yield* Simba.make(options).pipe(
      Effect.provideService(LeaseBackend.LeaseBackend, link.backend),
      Effect.orDie
    )
    const events = yield* Ref.make<ReadonlyArray<Recorded>>([])
    yield* client.events.pipe(
      Stream.runForEach((event) =>
        Effect.flatMap(Clock.currentTimeMillis, (at) => Ref.update(events, (all) => [...all, { at, event }]))
      ),
      Effect.forkScoped
    )
    yield* settle
    return { client, events, calls: link.calls, hang: link.faults.pause(), faults: link.faults }
  })

/** `n` clients sharing one fresh in-memory backend. */
export const makeClients = (n: number, options: SimbaConfigInput = config) =>
  Effect.gen(function*() {
    const backend = yield* MemoryBackend.make()
    const clients: Array<TestClient> = []
    for (let i = 0; i < n; i++) clients.push(yield* makeClient(backend, options))
    return { backend, clients }
  })

/** Lets every ready fiber run without moving the clock. */
export const settle: Effect.Effect<void> = Effect.repeatN(Effect.yieldNow(), 50)

/** Moves virtual time forward in small steps, so every timer fires in order. */
export const advance = (duration: Duration.DurationInput, step: Duration.DurationInput = "100 millis") =>
  Effect.gen(function*() {
    let left = Duration.toMillis(Duration.decode(duration))
    const stepMillis = Duration.toMillis(Duration.decode(step))
    while (left > 0) {
      const by = Math.min(left, stepMillis)
      yield* TestClock.adjust(Duration.millis(by))
      yield* settle
      left -= by
    }
  })

/** The names this client currently leads. */
export const leading = (client: SimbaClient, name: string) =>
  Effect.map(client.snapshot, (s) => s.elections.some((e) => e.name === name && e.status === "LEADER"))

export const eventsOf = <Tag extends SimbaEvent["_tag"]>(
  events: Ref.Ref<ReadonlyArray<Recorded>>,
  tag: Tag
) =>
  Effect.map(Ref.get(events), (all) =>
    all.filter((r): r is { at: number; event: Extract<SimbaEvent, { _tag: Tag }> } => r.event._tag === tag))
