/** The TCK (`LeaseBackendSpec`, `FencingSpec`) on the standalone ZooKeeper at 127.0.0.1:2181, real time. */
import * as ZookeeperBackend from "../../src/layers/zookeeper/ZookeeperBackend.js"
import { FencingSpec } from "../tck/FencingSpec.js"
import { LeaseBackendSpec } from "../tck/LeaseBackendSpec.js"
import { clientTiming, granted, standalone, ttl } from "./ZookeeperServers.js"

const layer = ZookeeperBackend.layer(standalone)

LeaseBackendSpec("zookeeper", layer, {
  virtualTime: false,
  ttl,
  granted,
  hints: true,
  holds: true,
  // ZooKeeper's own session ids (64-bit, hex), not 128-bit random ones.
  randomSessionIds: false,
  client: clientTiming
})
FencingSpec("zookeeper", layer, { virtualTime: false, ttl, granted, client: clientTiming })
