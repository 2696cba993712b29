/**
 * A leader-only job on ZooKeeper: run several copies, exactly one leads at a time.
 *
 *   npx tsx examples/zookeeper-leader.ts        (SIMBA_ZK_CONNECT defaults to 127.0.0.1:2181)
 *
 * While it leads, the job writes to a *fenced* register kept in ZooKeeper itself: a node whose data is
 * the highest token written so far, updated by compare-and-set on the node's version, so a write is
 * accepted only if its token is at least that one. A paused or partitioned ex-leader can therefore
 * never write after the new leader did. Each accepted write prints the node version it created (one
 * per accepted write, in the order ZooKeeper applied them), so a reader can check that tokens never
 * go back. Ctrl-C (SIGINT) or SIGTERM stops it gracefully: the job is interrupted first, then the lease
 * node is deleted and the next leader's watch fires at once. The multi-process test
 * (test/zookeeper/multiprocess.test.ts) runs three copies, kills and pauses them.
 *
 * Environment: LEADER_NAME (default `example-leader`), FENCE_NODE (default `/simba-example/fence`),
 * WRITE_EVERY_MS (default 50), SIMBA_ZK_CONNECT, SIMBA_ZK_ROOT and the SIMBA_* timing settings (with
 * ZooKeeper, `SIMBA_LEASE_DURATION` is the session timeout asked for).
 */
import { NodeRuntime } from "@effect/platform-node"
import { Config, Effect, Schedule } from "effect"
import { Simba, type Term } from "simba"
import { SimbaZookeeperLive } from "simba/zookeeper"
import ZooKeeper from "zookeeper"

const say = (line: string) => Effect.sync(() => process.stdout.write(`${line}\n`))

/** A plain ZooKeeper connection for the fenced register, closed with the scope. */
const connect = (servers: string) =>
  Effect.acquireRelease(
    Effect.async<ZooKeeper>((resume) => {
      const zk = new ZooKeeper({ connect: servers, timeout: 10_000 })
      zk.once("connect", () => resume(Effect.succeed(zk)))
      zk.init({})
    }).pipe(Effect.timeout("10 seconds")),
    (zk) => Effect.sync(() => zk.close())
  )

/** The register's node and its parents, created when missing. */
const ensureNode = (zk: ZooKeeper, path: string) =>
  Effect.forEach(
    path.split("/").slice(1).map((_, i, parts) => `/${parts.slice(0, i + 1).join("/")}`),
    (node) => Effect.promise(() => zk.create(node, "0", 0).catch(() => undefined)),
    { discard: true }
  )

/** Writes `token` if it is at least the register's: compare-and-set on the node's version, retried on a race. */
const fencedWrite = (zk: ZooKeeper, path: string, token: bigint) =>
  Effect.tryPromise(async () => {
    for (;;) {
      const [stat, data] = (await zk.get(path, false)) as [{ version: number }, Buffer]
      if (BigInt(data.toString()) > token) return { accepted: false, version: stat.version }
      try {
        const written = (await zk.set(path, token.toString(), stat.version)) as { version: number }
        return { accepted: true, version: written.version }
      } catch (error) {
        // -103: someone wrote in between; read again.
        if (!(error instanceof Error && error.message.startsWith("-103"))) throw error
      }
    }
  })

const program = Effect.gen(function*() {
  const name = yield* Config.string("LEADER_NAME").pipe(Config.withDefault("example-leader"))
  const fence = yield* Config.string("FENCE_NODE").pipe(Config.withDefault("/simba-example/fence"))
  const every = yield* Config.integer("WRITE_EVERY_MS").pipe(Config.withDefault(50))
  const servers = yield* Config.string("SIMBA_ZK_CONNECT").pipe(Config.withDefault("127.0.0.1:2181"))
  const zk = yield* connect(servers)
  yield* ensureNode(zk, fence)

  const write = (term: Term.Term, seq: number) =>
    fencedWrite(zk, fence, term.token).pipe(
      Effect.flatMap(({ accepted, version }) =>
        say(`WRITE ${term.token} ${accepted ? "accepted" : "rejected"} ${version} ${process.pid}:${seq}`)
      )
    )

  yield* say(`READY ${process.pid}`)
  yield* Simba.runWhileLeader(name, (term) =>
    Effect.gen(function*() {
      yield* say(`ELECTED ${term.token} ${process.pid}`)
      let seq = 0
      // Check the term before every write: a paused process reads isValid = false on waking.
      yield* Effect.flatMap(term.ensureValid(), () => write(term, seq++)).pipe(
        Effect.repeat(Schedule.spaced(`${every} millis`))
      )
    }).pipe(
      // Interrupted (revoked) or failed (a woken process finds its term ended): the term is over.
      Effect.ensuring(say(`REVOKED ${term.token} ${process.pid}`))
    ))
})

program.pipe(Effect.scoped, Effect.provide(SimbaZookeeperLive), NodeRuntime.runMain)
