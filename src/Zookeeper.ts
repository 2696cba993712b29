/**
 * `simba/zookeeper`: the ZooKeeper backend (through the `zookeeper` addon) and `Simba` on it. The
 * addon is an optional peer, loaded only when a layer of this module is built.
 */
import * as Layer from "effect/Layer"
import * as ZookeeperBackend from "./layers/zookeeper/ZookeeperBackend.js"
import * as Simba from "./Simba.js"

export * as ZookeeperBackend from "./layers/zookeeper/ZookeeperBackend.js"

/**
 * `Simba` on ZooKeeper: `SIMBA_ZK_CONNECT` (default `127.0.0.1:2181`), `SIMBA_ZK_ROOT` (default
 * `/simba`), plus the `SIMBA_*` timing settings.
 */
export const SimbaZookeeperLive = Simba.layerConfig.pipe(
  Layer.provide(ZookeeperBackend.layerConfig(ZookeeperBackend.config))
)
