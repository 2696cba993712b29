/**
 * The Lua scripts: every state change of the backend is one of them, atomic on the server (see
 * `RedisBackend` for the key layout, the waiter queue and the per-slot design). This module is their
 * one entry; `scripts/` holds them by concern: the shared Lua prelude (`prelude.ts`), how a script is
 * declared and called (`define.ts`), a lease's scripts (`lease.ts`), the session's in mode `node`
 * (`session.ts`) and in mode `cluster` (`cluster.ts`), and group membership (`groups.ts`).
 *
 * The mode (`node` or `cluster`, see `Mode`) is an explicit argument of the scripts that behave
 * differently in each: where a session is found alive, and whether a freed lease is granted to its
 * first waiter (`node`) or reserved for it (`cluster`).
 */
import { closeHome, closeSlot, forgetSlots, register, renewHome, renewHomeSlots, renewShadows, renewSlot, renewSlots } from "./scripts/cluster.js"
import type { Script } from "./scripts/define.js"
import * as Library from "./scripts/library.js"
import { addMember, forgetGroup, join, joinHome, leave, members, removeMember } from "./scripts/groups.js"
import { acquire, acquireInCluster, bootMarker, release, releaseInCluster, withdraw, withdrawInCluster } from "./scripts/lease.js"
import {
  acquireHold,
  acquireHoldInCluster,
  releaseHold,
  releaseHoldInCluster,
  withdrawHold,
  withdrawHoldInCluster
} from "./scripts/pools.js"
import { close, open, renew } from "./scripts/session.js"

export type { Arg, Call, Caller, Script } from "./scripts/define.js"
export { prelude, queueScanBatch, reservationMillis } from "./scripts/prelude.js"
export {
  acquire,
  acquireHold,
  acquireHoldInCluster,
  acquireInCluster,
  addMember,
  bootMarker,
  close,
  closeHome,
  closeSlot,
  forgetGroup,
  forgetSlots,
  join,
  joinHome,
  leave,
  members,
  open,
  register,
  release,
  releaseHold,
  releaseHoldInCluster,
  releaseInCluster,
  removeMember,
  renew,
  renewHome,
  renewHomeSlots,
  renewShadows,
  renewSlot,
  renewSlots,
  withdraw,
  withdrawHold,
  withdrawHoldInCluster,
  withdrawInCluster
}

/** Every script with its parameter names, for tests. */
export const all: ReadonlyArray<{ readonly script: Script; readonly params: ReadonlyArray<string> }> = [
  open,
  acquire,
  acquireInCluster,
  release,
  releaseInCluster,
  withdraw,
  withdrawInCluster,
  acquireHold,
  acquireHoldInCluster,
  releaseHold,
  releaseHoldInCluster,
  withdrawHold,
  withdrawHoldInCluster,
  members,
  renew,
  close,
  join,
  leave,
  register,
  renewHome,
  renewHomeSlots,
  renewSlot,
  renewSlots,
  renewShadows,
  forgetSlots,
  closeHome,
  closeSlot,
  addMember,
  joinHome,
  removeMember,
  forgetGroup,
  bootMarker
]

/** Every script as one function library (Redis 7), which the backend loads where the server takes it. */
export const library: Library.Library = Library.make(all.map(({ script }) => script))
export type { Library } from "./scripts/library.js"
