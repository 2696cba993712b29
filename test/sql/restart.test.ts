/**
 * A database crash and restart mid-run, on private servers (test/support/sqlServer.ts): the leader's
 * term ends at its local deadline while the database is down, nobody is elected before that, the
 * pools (and PostgreSQL's LISTEN connection) recover, tokens keep rising after the restart, and on
 * PostgreSQL, whose commits do not wait for the WAL flush, nobody is elected before its lock-delay.
 */
import { afterAll, beforeAll, describe, expect, it } from "@effect/vitest"
import * as Effect from "effect/Effect"
import * as Exit from "effect/Exit"
import * as Fiber from "effect/Fiber"
import * as Layer from "effect/Layer"
import * as Ref from "effect/Ref"
import * as Scope from "effect/Scope"
import { LeaseBackend } from "../../src/LeaseBackend.js"
import * as MysqlBackend from "../../src/layers/sql/MysqlBackend.js"
import * as PgBackend from "../../src/layers/sql/PgBackend.js"
import * as Simba from "../../src/Simba.js"
import { canStartPrivateServers, type PrivateSqlServer, privateMariadb, privatePostgres } from "../support/sqlServer.js"

interface Server {
  readonly server: PrivateSqlServer
  /**
   * How long after the restart nothing is granted: PostgreSQL commits without a WAL flush, finds
   * after the crash that it may have lost some (its unlogged boot table is empty) and waits its
   * lockDelay; MariaDB's commits are durable.
   */
  readonly lockDelay: number
  readonly layer: (url: string) => Layer.Layer<LeaseBackend, unknown>
}

const leaseDuration = 2000
/** At least the lease duration, as docs/sql.md asks. */
const pgLockDelay = 3000

interface Event {
  readonly at: number
  readonly client: string
  readonly kind: "elected" | "revoked"
  readonly token: bigint
}

const servers: ReadonlyArray<Server> = [
  {
    server: privatePostgres(),
    lockDelay: pgLockDelay,
    layer: (url) => PgBackend.layer({ url, tablePrefix: "simba_t_rs_", lockDelay: `${pgLockDelay} millis` })
  },
  { server: privateMariadb(), lockDelay: 0, layer: (url) => MysqlBackend.layer({ url, tablePrefix: "simba_t_rs_" }) }
]

// Starting private servers needs root, as on this project's machines and CI; elsewhere these cases cannot run.
for (const { server, lockDelay, layer } of servers) {
  describe.skipIf(!canStartPrivateServers)(`${server.label} crash and restart`, () => {
    beforeAll(() => server.setUp(), 60_000)
    afterAll(() => server.tearDown())

    it.live("terms end by their deadline while the database is down; after the restart a leader is elected with a larger token", () =>
      Effect.gen(function*() {
        const url = server.url()
        const events = yield* Ref.make<ReadonlyArray<Event>>([])
        const record = (client: string, kind: Event["kind"], token: bigint) =>
          Ref.update(events, (list) => [...list, { at: performance.now(), client, kind, token }])
        const contender = (label: string) =>
          Effect.gen(function*() {
            const backend = yield* Layer.build(layer(url))
            const client = yield* Simba.make({ leaseDuration }).pipe(
              Effect.provideService(LeaseBackend, backend.unsafeMap.get(LeaseBackend.key) as LeaseBackend["Type"])
            )
            return yield* Effect.forkScoped(client.runWhileLeader("restart", (term) =>
              Effect.zipRight(
                record(label, "elected", term.token),
                Effect.never
              ).pipe(Effect.ensuring(record(label, "revoked", term.token)))))
          })
        const scope = yield* Scope.make()
        const fibers = yield* Effect.all([contender("a"), contender("b")]).pipe(Scope.extend(scope))
        const waitFor = (predicate: (list: ReadonlyArray<Event>) => boolean, what: string, ms: number) =>
          Effect.gen(function*() {
            const until = performance.now() + ms
            for (;;) {
              const list = yield* Ref.get(events)
              if (predicate(list)) return list
              if (performance.now() > until) return yield* Effect.dieMessage(`timed out waiting for ${what}: ${JSON.stringify(list, (_, v) => typeof v === "bigint" ? String(v) : v)}`)
              yield* Effect.sleep("10 millis")
            }
          })
        const first = (yield* waitFor((l) => l.some((e) => e.kind === "elected"), "a leader", 15_000))
          .find((e) => e.kind === "elected")!
        yield* Effect.sleep("700 millis")

        // Crash (no shutdown checkpoint), stay down longer than the lease, then start again.
        const crashedAt = performance.now()
        yield* Effect.sync(server.crash)
        const revoked = (yield* waitFor((l) => l.some((e) => e.kind === "revoked"), "the leader's revocation", 10_000))
          .find((e) => e.kind === "revoked")!
        expect(revoked.token).toBe(first.token)
        // Ended by its local deadline: at most leaseDuration after the crash (its last renewal came before;
        // 1 s of slack for a stalled test process), and before the database is back.
        expect(revoked.at - crashedAt).toBeLessThanOrEqual(leaseDuration + 1000)
        yield* Effect.sleep(`${Math.max(0, leaseDuration + 1000 - (performance.now() - crashedAt))} millis`)
        expect((yield* Ref.get(events)).filter((e) => e.kind === "elected")).toHaveLength(1)
        yield* Effect.promise(server.start)
        const restartedAt = performance.now()

        const after = (yield* waitFor((l) => l.filter((e) => e.kind === "elected").length >= 2, "a leader after the restart", 20_000))
          .filter((e) => e.kind === "elected")[1]!
        expect(after.token).toBeGreaterThan(first.token)
        expect(after.at).toBeGreaterThan(revoked.at)
        // The server took connections before pg_ctl saw it up (it polls): 500 ms of slack for that.
        expect(after.at - restartedAt).toBeGreaterThanOrEqual(lockDelay - 500)
        yield* Effect.forEach(fibers, Fiber.interrupt, { discard: true })
        yield* Scope.close(scope, Exit.void)
      }), 90_000)
  })
}
