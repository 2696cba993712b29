/**
 * Creates the Redis backend's boot markers (prefix `simba`) on the test servers without a lock-delay:
 * on 127.0.0.1:6379 for both modes, and on the cluster 127.0.0.1:7000-7002. Run by `services.sh`,
 * which started those servers empty; markers that exist are kept (so are their delays).
 */
import { Effect } from "effect"
import * as RedisBackend from "../src/layers/redis/RedisBackend.js"

const node = { url: "redis://127.0.0.1:6379", lockDelay: 0 } as const
const all = [node, { ...node, routeBySlot: true }, { cluster: { nodes: [7000, 7001, 7002].map((port) => ({ host: "127.0.0.1", port })) }, lockDelay: 0 }]

Effect.runPromise(Effect.scoped(Effect.forEach(all, (options) => RedisBackend.make(options), { discard: true }))).then(
  () => process.exit(0),
  (error: unknown) => {
    console.error(error)
    process.exit(1)
  }
)
