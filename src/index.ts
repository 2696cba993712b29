/**
 * Simba for Effect: leader election, fenced distributed locks, partitioned leadership and leader-only
 * schedules over pluggable backends.
 *
 * The root holds the client API, the backend SPI, terms, events, errors, config and the in-memory
 * backend, and loads no driver. Each other backend is a subpath (`simba/redis`, `simba/postgres`,
 * `simba/mysql`, `simba/zookeeper`), as are `simba/test`, `simba/http` and `simba/fencing/*`.
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
export * from "./Errors.js"
export { MemoryBackend, SimbaMemoryLive } from "./Memory.js"
export type { Election, ElectionError, LockError, SimbaClient, SimbaSnapshot } from "./Simba.js"
export type { CronOptions, ScheduleOptions, WorkFailureOptions } from "./Simba.js"
