/**
 * Simba for Effect: leader election, fenced distributed locks, partitioned leadership and leader-only
 * schedules over pluggable backends.
 */
export * as Simba from "./Simba.js"
export * as Term from "./Term.js"
export { RevokeReason } from "./Term.js"
export * as SimbaConfig from "./SimbaConfig.js"
export { format as formatEvent, SimbaEvent } from "./SimbaEvent.js"
export type { ElectionStatus, SessionEndReason, SessionStatus } from "./SimbaEvent.js"
export * as LeaseBackend from "./LeaseBackend.js"
export * as LeaseName from "./LeaseName.js"
export * as PartitionAssignment from "./PartitionAssignment.js"
export * as MemoryBackend from "./layers/Memory.js"
export * from "./Errors.js"
export { SimbaMemoryLive } from "./Live.js"
export * as RedisBackend from "./layers/redis/RedisBackend.js"
export { SimbaRedisLive } from "./layers/redis/RedisBackend.js"
export * as ZookeeperBackend from "./layers/zookeeper/ZookeeperBackend.js"
export { SimbaZookeeperLive } from "./layers/zookeeper/ZookeeperBackend.js"
export type { Election, ElectionError, LockError, SimbaClient, SimbaSnapshot } from "./Simba.js"
export * as SimbaTest from "./SimbaTest.js"
export * as SimbaHttp from "./SimbaHttp.js"
