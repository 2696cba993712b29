/** The TCK (`LeaseBackendSpec`, `FencingSpec`) on the single Redis node at 127.0.0.1:6379, real time. */
import * as RedisBackend from "../../src/layers/redis/RedisBackend.js"
import { FencingSpec } from "../tck/FencingSpec.js"
import { LeaseBackendSpec } from "../tck/LeaseBackendSpec.js"
import { clientTiming, singleNode, ttl } from "./RedisServers.js"

const layer = RedisBackend.layer(singleNode)

LeaseBackendSpec("redis", layer, { virtualTime: false, ttl, hints: true, hintOnWait: true, handOffGrants: true, holds: true, client: clientTiming })
FencingSpec("redis", layer, { virtualTime: false, ttl, client: clientTiming })
