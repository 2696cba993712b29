/** The TCK (`LeaseBackendSpec`, `FencingSpec`) on the 3-master Redis Cluster at 127.0.0.1:7000-7002, real time. */
import * as RedisBackend from "../../src/layers/redis/RedisBackend.js"
import { FencingSpec } from "../tck/FencingSpec.js"
import { LeaseBackendSpec } from "../tck/LeaseBackendSpec.js"
import { clientTiming, cluster, ttl } from "./RedisServers.js"

const layer = RedisBackend.layer(cluster)

// Renewals are versioned per slot (see "Renewal versions" in `RedisBackend.ts`).
LeaseBackendSpec("redis cluster", layer, { virtualTime: false, ttl, hints: true, hintOnWait: true, holds: true, client: clientTiming })
FencingSpec("redis cluster", layer, { virtualTime: false, ttl, client: clientTiming })
