/**
 * A stress of the `zookeeper` addon under ensemble faults, run by hand (not part of `npm test`):
 *
 *     node --import tsx test/zookeeper/addonStress.ts [minutes]     (default 3)
 *
 * `CLIENTS` Simba clients (default 3, so as many ZooKeeper sessions) in this process contend for three
 * names on a private ensemble (`Ensemble.ts`) while, every few seconds, the ZooKeeper leader is
 * killed and restarted or one or both followers are stopped (SIGSTOP) and resumed; meanwhile this
 * process opens a socket to each server every 100 ms (four-letter words), unless `NO_PROBES=1`.
 * Prints a line per fault cycle. With the addon 7.3 and the defaults the process died within two
 * cycles in every run (`uv_poll_start: Assertion '!uv__is_closing(handle)' failed`, or SIGSEGV):
 * see docs/zookeeper.md, "Known defects". Exit status 0: no crash for the whole time. The ensemble's
 * JVMs are killed on a normal exit; after a crash, kill what `pgrep -f simba-zk-ensemble` lists.
 */
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import { LeaseBackend, type LeaseBackendService } from "../../src/LeaseBackend.js"
import * as ZookeeperBackend from "../../src/layers/zookeeper/ZookeeperBackend.js"
import * as Simba from "../../src/Simba.js"
import * as Ensemble from "./Ensemble.js"

const minutes = Number(process.argv[2] ?? 3)
const clients = Number(process.env["CLIENTS"] ?? 3)
const probes = process.env["NO_PROBES"] !== "1"

const main = async () => {
  const ensemble = await Ensemble.start()
  process.on("exit", () => ensemble.stop())
  await ensemble.awaitLeader(60_000)
  const probing = setInterval(() => {
    if (probes) for (const node of ensemble.nodes) void Ensemble.modeOf(node.clientPort)
  }, 100)
  const program = Effect.scoped(Effect.gen(function*() {
    const context = yield* Layer.build(ZookeeperBackend.layer({ connect: ensemble.connect, root: "/simba-addon-stress" }))
    const backend = context.unsafeMap.get(LeaseBackend.key) as LeaseBackendService
    let terms = 0
    for (let i = 0; i < clients; i++) {
      const client = yield* Simba.make({ leaseDuration: "3 seconds", logLevel: "None" }).pipe(Effect.provideService(LeaseBackend, backend))
      for (const name of ["a", "b", "c"]) {
        yield* client.election(`stress-${name}`, { work: () => Effect.zipRight(Effect.sync(() => terms++), Effect.never) })
      }
    }
    const until = performance.now() + minutes * 60_000
    const pause = (from: number, spread: number) => Effect.sleep(Duration.millis(from + Math.random() * spread))
    for (let cycle = 1; performance.now() < until; cycle++) {
      const leader = yield* Effect.promise(() => ensemble.awaitLeader(30_000).catch(() => undefined))
      const followers = ensemble.nodes.filter((node) => node !== leader)
      const fault = cycle % 3 === 0 && leader !== undefined ? "leader killed" : cycle % 3 === 1 ? "both followers stopped" : "a follower stopped"
      if (fault === "leader killed") {
        ensemble.signal(leader!, "SIGKILL")
        yield* pause(1500, 2500)
        ensemble.start(leader!)
      } else {
        for (const node of fault === "a follower stopped" ? followers.slice(0, 1) : followers) ensemble.signal(node, "SIGSTOP")
        yield* pause(1000, 4000)
        for (const node of ensemble.nodes) ensemble.signal(node, "SIGCONT")
      }
      yield* pause(2000, 2000)
      console.log(`cycle ${cycle}: ${fault}; ${terms} terms won so far`)
    }
  }))
  await Effect.runPromise(program)
  clearInterval(probing)
}
main().then(() => process.exit(0), (error: unknown) => {
  console.error(error)
  process.exit(1)
})
