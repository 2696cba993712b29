/** The TCK (`LeaseBackendSpec`, `FencingSpec`) on the single Redis node at 127.0.0.1:6379, real time. */
import * as RedisBackend from "../../src/layers/redis/RedisBackend.js"
import { FencingSpec } from "../tck/FencingSpec.js"
import { LeaseBackendSpec } from "../tck/LeaseBackendSpec.js"
import { clientTiming, singleNode, ttl } from "./RedisServers.js"

const layer = RedisBackend.layer(singleNode)

// Phase 1 of the split: every renewal still lists the leases (versioned renewals on one node come next).
LeaseBackendSpec("redis", layer, {
  virtualTime: false,
  ttl,
  hints: true,
  versionedRenewals: false,
  handOffGrants: true,
  client: clientTiming
})
FencingSpec("redis", layer, { virtualTime: false, ttl, client: clientTiming })
