/**
 * The keys and channels of one key prefix. The layout is described in docs/design.md, "Redis",
 * "Keys"; the braces are literal (Redis hash tags). Session ids: `internal/sessionId.ts` (a collision
 * is refused by `SET NX`).
 */

/** The key prefix when none is given. */
export const defaultPrefix = "simba"

/** The keys and channels of one key prefix. */
export const keys = (prefix: string = defaultPrefix) => ({
  /** Lease hash, also the channel its releases are published on. */
  lease: (name: string) => `${prefix}:lease:{${name}}`,
  /**
   * Lease hash of a hold (`pool~...`, see `LeaseName.holdName`) in mode `cluster`: tagged by the
   * pool's name (`<prefix>:lease:{<pool>}~...`), so it lies in the pool's slot; on one node a hold's
   * hash is `lease(holdName)`. Also the prefix of its holder record (`:holder`).
   */
  holdInCluster: (pool: string, holdName: string) => `${prefix}:lease:{${pool}}${holdName.slice(pool.length)}`,
  /**
   * Holder record of a lease (`sid:token` while held, in the lease's slot): restores a lease hash
   * deleted by hand instead of granting the lease to another session.
   */
  leaseHolder: (name: string) => `${prefix}:lease:{${name}}:holder`,
  /** Waiter queue of a lease (sorted set of session ids by server time of arrival), in the lease's slot. */
  leaseQueue: (name: string) => `${prefix}:lease:{${name}}:queue`,
  /** Group sorted set, also the channel its changes are published on. */
  group: (group: string) => `${prefix}:group:{${group}}`,
  session: (sessionId: string) => `${prefix}:session:{${sessionId}}`,
  sessionLeases: (sessionId: string) => `${prefix}:session:{${sessionId}}:leases`,
  sessionGroups: (sessionId: string) => `${prefix}:session:{${sessionId}}:groups`,
  sessionSlots: (sessionId: string) => `${prefix}:session:{${sessionId}}:slots`,
  shadow: (tag: string, sessionId: string) => `${prefix}:shadow:{${tag}}:${sessionId}`,
  shadowLeases: (tag: string, sessionId: string) => `${prefix}:shadow:{${tag}}:${sessionId}:leases`,
  /**
   * A session's pulse on one node (mode `cluster`), in the slot of `tag`: its shadows on that node
   * name it, and it says the session lives there (docs/design.md, "Redis Cluster: per-slot shadows and pulses"). Its value
   * counts the changes of the session's lease sets in the slots relying on it.
   */
  pulse: (tag: string, sessionId: string) => `${prefix}:pulse:{${tag}}:${sessionId}`,
  /** Boot marker of the store (mode `node`): the server ms from which grants may resume (lock-delay). */
  boot: `${prefix}:boot`,
  /** Boot marker of the slot of `tag` (mode `cluster`). */
  bootIn: (tag: string) => `${prefix}:boot:{${tag}}`,
  /** What the scripts append `name .. '}'` to for a lease key (they find lease names in sets). */
  leasePrefix: `${prefix}:lease:{`,
  /** What the scripts append `group .. '}'` to for a group key. */
  groupPrefix: `${prefix}:group:{`,
  /** What the scripts append `sid .. '}'` to for a session key (mode `node`). */
  sessionPrefix: `${prefix}:session:{`,
  /** What the scripts append `sid` to for a session's shadow in the slot of `tag` (mode `cluster`). */
  shadowPrefix: (tag: string) => `${prefix}:shadow:{${tag}}:`,
  /** What the scripts append `tag .. '}:' .. sid` to for a session's shadow in the slot of `tag` (mode `cluster`). */
  shadowBase: `${prefix}:shadow:{`,
  groupPattern: `${prefix}:group:*`
})

/** The keys of one prefix, as `keys` builds them. */
export type Keys = ReturnType<typeof keys>
