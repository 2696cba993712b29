/**
 * One write to the ensemble from a fresh process (run by the prober, `modes.ts`): a new ZooKeeper
 * session creates an ephemeral sequential node under `/` and closes. Exit status 0 when the create
 * was answered within 4 s, 1 otherwise. Creating a session and a node are both commits, so a success
 * shows the ensemble serves; a server whose mode is `leader` may still not (see ensemble.test.ts).
 * Plain JavaScript: a probe is spawned every second or so, and tsx would cost each one a second of CPU.
 */
import ZooKeeper from "zookeeper"

const connect = process.argv[2]
const zk = new ZooKeeper({})
const finish = (status) => {
  zk.close()
  process.exit(status)
}
setTimeout(() => finish(1), 4_000)
zk.on("connect", () => zk.a_create("/simba-write-probe-", "", 3, (rc) => finish(rc === 0 ? 0 : 1)))
zk.init({ connect, timeout: 4_000, debug_level: 0 })
