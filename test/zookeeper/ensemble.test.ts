/**
 * Simba on a 3-node ZooKeeper ensemble of its own (see Ensemble.ts), two clients competing for one
 * name, a counter of running leader work (never above one):
 *
 * - `kill -9` of the ZooKeeper leader while a Simba leader runs: the ensemble elects another leader
 *   within the session timeout, so the Simba sessions survive (same ids), there is never a second
 *   Simba leader, and a term won afterwards carries a larger token from a later epoch (the high 32
 *   bits of the zxid);
 * - SIGSTOP of a majority (the two followers): nothing can be granted; the leader's term ends by its
 *   local deadline; after SIGCONT the ensemble elects a leader again (a new epoch) and so does Simba,
 *   with a larger token.
 *
 * The majority stopped is the two followers, not the ZooKeeper leader and a follower: with the leader
 * among the stopped, ZooKeeper 3.8.0 (the Debian 12 package) sometimes never commits again after
 * SIGCONT. The resumed leader keeps LEADING in the same epoch, both followers re-sync with it by
 * DIFF, and from then on its log shows only "Submitting global closeSession" (the same sessions
 * again and again), never "Committing": no session can be created on any of the three servers, by
 * this process or by a fresh one (seen with a separate probe process), until the ensemble is
 * restarted. That is a server defect Simba cannot work around (it was the "no leader within 27 s"
 * of issue 10); stopping the followers makes the leader give up its quorum itself and forces a new
 * election, which ZooKeeper handles.
 *
 * A CI run still failed the second case once with "no Simba leader within 27000 ms" after the
 * ensemble had a leader again, with nothing printed to tell whose fault it was (not reproduced since
 * in 27 runs of the case, 16 of them eight to a process, beside two busy cores or another ZooKeeper
 * suite). So Simba is now judged from when a fresh process can write (`awaitServing`: a session and a
 * node created by a process of its own), not from when a server says it leads; an ensemble that never
 * serves again is restarted on its data, saying so with its logs; and a Simba failure prints each
 * client's view, whether a fresh process writes at that moment, and the servers' logs.
 */
import { afterAll, beforeAll, describe, expect, it } from "@effect/vitest"
import * as Deferred from "effect/Deferred"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Option from "effect/Option"
import type * as Scope from "effect/Scope"
import { randomBytes } from "node:crypto"
import { LeaseBackend, type LeaseBackendService } from "../../src/LeaseBackend.js"
import * as ZookeeperBackend from "../../src/layers/zookeeper/ZookeeperBackend.js"
import * as Simba from "../../src/Simba.js"
import type { Election, SimbaClient } from "../../src/Simba.js"
import type { RevokeReason, Term } from "../../src/Term.js"
import * as Ensemble from "./Ensemble.js"

let ensemble: Ensemble.Ensemble

beforeAll(async () => {
  ensemble = await Ensemble.start()
  await ensemble.awaitLeader(60_000)
}, 90_000)

afterAll(() => ensemble?.stop())

const epochOf = (token: bigint) => token >> 32n

interface Contest {
  readonly clients: ReadonlyArray<SimbaClient>
  readonly elections: ReadonlyArray<Election>
  /** Every term won, in order. */
  readonly won: Array<{ readonly client: number; readonly token: bigint; readonly at: number }>
  readonly maxOwners: () => number
  /** The index of the client that leads now, once one does. */
  readonly leader: (timeoutMs: number) => Effect.Effect<{ readonly index: number; readonly term: Term }>
}

/** Two clients on one backend of the ensemble, both candidates for a fresh name. */
const contest = (leaseDuration: number): Effect.Effect<Contest, unknown, Scope.Scope> =>
  Effect.gen(function*() {
    const context = yield* Layer.build(ZookeeperBackend.layer({ connect: ensemble.connect, root: "/simba-ensemble" }))
    const backend = context.unsafeMap.get(LeaseBackend.key) as LeaseBackendService
    const name = `ens-${randomBytes(6).toString("hex")}`
    const won: Array<{ client: number; token: bigint; at: number }> = []
    let owners = 0
    let maxOwners = 0
    const clients: Array<SimbaClient> = []
    const elections: Array<Election> = []
    for (let i = 0; i < 2; i++) {
      const client = yield* Simba.make({ leaseDuration }).pipe(Effect.provideService(LeaseBackend, backend))
      clients.push(client)
      elections.push(yield* client.election(name, {
        work: (term) =>
          Effect.acquireRelease(
            Effect.sync(() => {
              owners++
              maxOwners = Math.max(maxOwners, owners)
              won.push({ client: i, token: term.token, at: performance.now() })
            }),
            () => Effect.sync(() => owners--)
          ).pipe(Effect.zipRight(Effect.never), Effect.scoped)
      }))
    }
    const leader = (timeoutMs: number) =>
      Effect.gen(function*() {
        const until = performance.now() + timeoutMs
        for (;;) {
          const terms = yield* Effect.forEach(elections, (e) => e.term)
          const index = terms.findIndex(Option.isSome)
          if (index >= 0) return { index, term: Option.getOrThrow(terms[index]!) }
          if (performance.now() > until) return yield* Effect.die(`no Simba leader within ${timeoutMs} ms`)
          yield* Effect.sleep("20 millis")
        }
      })
    return { clients, elections, won, maxOwners: () => maxOwners, leader }
  })

const sessionIds = (clients: ReadonlyArray<SimbaClient>) =>
  Effect.forEach(clients, (client) => Effect.map(client.snapshot, (snapshot) => snapshot.session.id))

/** The session ids of all clients, once every one has a session (the loser may still be opening its own). */
const allSessionIds = (clients: ReadonlyArray<SimbaClient>, timeoutMs: number) =>
  Effect.gen(function*() {
    const until = performance.now() + timeoutMs
    for (;;) {
      const ids = yield* sessionIds(clients)
      if (ids.every((id) => id !== undefined)) return ids
      if (performance.now() > until) return yield* Effect.die(`not every client had a session within ${timeoutMs} ms`)
      yield* Effect.sleep("20 millis")
    }
  })

describe("ZooKeeper ensemble of three", () => {
  it.scopedLive("kill -9 of the ZooKeeper leader: sessions survive, one Simba leader, tokens rise across the epoch change", () =>
    Effect.gen(function*() {
      // T = 20 s: a renewal proves 5/12 T = 8.3 s, so the ensemble's re-election and the clients'
      // reconnect (a second or two with tickTime 500; over 3 s on a loaded machine, where T = 10 s
      // once let the leader's session pass its local deadline and be replaced) fit inside it.
      const c = yield* contest(20_000)
      const first = yield* c.leader(15_000)
      const sessionsBefore = yield* allSessionIds(c.clients, 15_000)

      const zkLeader = yield* Effect.promise(() => ensemble.awaitLeader(10_000))
      ensemble.signal(zkLeader, "SIGKILL")
      const rest = ensemble.nodes.filter((node) => node !== zkLeader)
      yield* Effect.promise(() => ensemble.awaitLeader(30_000, rest))
      // Both sessions renew through the new quorum (reconnected to a live server if theirs died).
      yield* Effect.sleep("4 seconds")
      yield* c.leader(15_000)
      expect(yield* sessionIds(c.clients)).toEqual(sessionsBefore)
      expect(c.maxOwners()).toBe(1)

      // A term won now is granted by the new epoch: its token is larger, from a later epoch.
      yield* c.elections[first.index]!.stepDown("3 seconds")
      const until = performance.now() + 15_000
      while (!c.won.some((w) => w.token > first.term.token)) {
        if (performance.now() > until) return expect.fail(`no new term after the step-down: ${c.won.map((w) => String(w.token)).join(", ")}`)
        yield* Effect.sleep("20 millis")
      }
      const last = c.won.at(-1)!
      expect(last.token).toBeGreaterThan(first.term.token)
      expect(epochOf(last.token)).toBeGreaterThan(epochOf(first.term.token))
      for (let i = 1; i < c.won.length; i++) expect(c.won[i]!.token).toBeGreaterThan(c.won[i - 1]!.token)
      expect(c.maxOwners()).toBe(1)

      // Bring the killed node back for the next case.
      ensemble.start(zkLeader)
      yield* Effect.promise(() => waitAllUp(30_000))
    }), 120_000)

  it.scopedLive("SIGSTOP of a majority: the leader's term ends by its deadline; a leader again after they resume", () =>
    Effect.gen(function*() {
      yield* Effect.promise(() => waitAllUp(30_000))
      // T = 6 s; a renewal proves 2.5 s.
      const leaseDuration = 6_000
      const proven = leaseDuration * 5 / 12
      const c = yield* contest(leaseDuration)
      const first = yield* c.leader(15_000)
      const revoked = yield* Deferred.make<{ readonly reason: RevokeReason; readonly at: number }>()
      yield* first.term.revoked.pipe(
        Effect.flatMap((reason) => Deferred.succeed(revoked, { reason, at: performance.now() })),
        Effect.forkScoped
      )

      const zkLeader = yield* Effect.promise(() => ensemble.awaitLeader(10_000))
      // The two followers (see the module comment for why not the leader).
      const stopped = ensemble.nodes.filter((node) => node !== zkLeader)
      const stoppedAt = performance.now()
      for (const node of stopped) ensemble.signal(node, "SIGSTOP")
      // The leader left running serves reads until it finds its quorum lost: a follower counts as
      // synced for syncLimit ticks after its last ack, and the leader checks once a tick (every other
      // half tick), so it answers for up to (syncLimit + 2) ticks after the stop (3 s; terms here
      // ended up to 4.7 s after it, where the bound of syncLimit ticks left 0.8 s). The last renewal
      // it answers proves `proven` from when it was sent. Slack: 1 s.
      const bound = (Ensemble.syncLimit + 2) * Ensemble.tickTime + proven + 1000
      const end = yield* Deferred.await(revoked).pipe(
        Effect.timeoutFail({ duration: Duration.millis(bound), onTimeout: () => new Error(`the term outlived ${bound} ms without a quorum`) })
      )
      expect(["DEADLINE_PASSED", "SESSION_EXPIRED"]).toContain(end.reason)
      expect(c.won).toHaveLength(1)

      for (const node of stopped) ensemble.signal(node, "SIGCONT")
      const resumedAt = performance.now()
      yield* Effect.promise(() => ensemble.awaitLeader(30_000))
      // A server that says it leads may still commit nothing (the 3.8.0 defect of the module comment):
      // Simba is judged from when a fresh process can write, and an ensemble that never serves again
      // is restarted on its data (and said so), as an operator would.
      if (!(yield* Effect.promise(() => ensemble.awaitServing(20_000)))) {
        console.log(
          `zookeeper ensemble: no fresh process could write within 20 s of the resume; restarting the ensemble. ` +
            `Its logs:\n${ensemble.nodes.map((node) => `--- server ${node.id}\n${ensemble.logTail(node, 15)}`).join("\n")}`
        )
        yield* Effect.promise(() => ensemble.restart())
        yield* Effect.promise(() => ensemble.awaitLeader(60_000))
        expect(yield* Effect.promise(() => ensemble.awaitServing(30_000)), "the restarted ensemble serves").toBe(true)
      }
      const servingAt = performance.now()
      // The old session's node goes once the new ZooKeeper leader expires it (T after it took over),
      // unless the session survived and its client gives the lease back first.
      const again = yield* c.leader(2 * leaseDuration + 15_000).pipe(Effect.tapDefect(() => diagnose(c)))
      expect(again.term.token).toBeGreaterThan(first.term.token)
      expect(c.maxOwners()).toBe(1)
      for (let i = 1; i < c.won.length; i++) expect(c.won[i]!.token).toBeGreaterThan(c.won[i - 1]!.token)
      console.log(
        `zookeeper ensemble: term ended ${(end.at - stoppedAt).toFixed(0)} ms after the majority stopped (bound ${bound} ms), ` +
          `serving again ${(servingAt - resumedAt).toFixed(0)} ms and a Simba leader again ${(performance.now() - resumedAt).toFixed(0)} ms after it resumed`
      )
    }), 120_000)
})

/** What a failed case prints: each client's view, whether a fresh process can write now, the servers' logs. */
const diagnose = (c: Contest) =>
  Effect.gen(function*() {
    const snapshots = yield* Effect.forEach(c.clients, (client) => client.snapshot)
    const serving = yield* Effect.promise(() => ensemble.awaitServing(10_000))
    console.log(
      `zookeeper ensemble: no Simba leader. Clients: ${
        snapshots.map((snapshot, i) =>
          `${i}: session ${snapshot.session.id} ${snapshot.session.status} (${Duration.format(snapshot.session.remaining)} left), ` +
          snapshot.elections.map((e) => `${e.status}${e.token === undefined ? "" : ` token ${e.token}`}`).join(", ")
        ).join("; ")
      }; terms won: ${c.won.map((w) => `${w.client}:${w.token}`).join(", ")}; ` +
        `a fresh process ${serving ? "writes" : "cannot write"} now. Server logs:\n` +
        ensemble.nodes.map((node) => `--- server ${node.id}\n${ensemble.logTail(node, 25)}`).join("\n")
    )
  })

const waitAllUp = async (timeoutMs: number) => {
  const until = performance.now() + timeoutMs
  for (;;) {
    const modes = await ensemble.freshModes()
    if (modes.every((mode) => mode !== "down") && modes.includes("leader")) return
    if (performance.now() > until) throw new Error(`the ensemble is not whole within ${timeoutMs} ms (${modes.join(", ")})`)
  }
}
