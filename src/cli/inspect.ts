/**
 * `simba status` and `simba watch`: what the store holds (the backend's read-only `inspect`), once
 * or as a line per change.
 */
import * as Clock from "effect/Clock"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Option from "effect/Option"
import type { Inventory, LeaseBackendService } from "../LeaseBackend.js"
import { UsageError } from "./status.js"

const inventoryOf = (backend: LeaseBackendService): Effect.Effect<Inventory, unknown> =>
  backend.inspect ?? Effect.fail(new UsageError({ text: `the ${backend.backend} backend cannot list what it holds` }))

const millis = (duration: Duration.Duration | undefined): number | null =>
  duration === undefined ? null : Math.round(Duration.toMillis(duration))

/** The inventory as JSON-ready data: tokens as decimal strings (they exceed 2^53), durations in ms. */
export const toJson = (backend: string, inventory: Inventory) => ({
  backend,
  sessions: inventory.sessions.map((s) => ({ sessionId: s.sessionId, remainingMillis: millis(s.remaining) })),
  leases: inventory.leases.map((l) => ({ name: l.name, holder: l.holder ?? null, token: l.token.toString(), waiters: l.waiters })),
  groups: inventory.groups.map((g) => ({ group: g.group, members: g.members }))
})

/** The inventory as text for a terminal. */
export const toText = (backend: string, inventory: Inventory): string => {
  const lines = [`backend ${backend}`, `sessions (${inventory.sessions.length})`]
  for (const s of inventory.sessions) {
    lines.push(`  ${s.sessionId}${s.remaining === undefined ? "" : `  expires in ${Duration.format(Duration.millis(millis(s.remaining) ?? 0))}`}`)
  }
  lines.push(`leases (${inventory.leases.length})`)
  for (const l of inventory.leases) {
    const held = l.holder === undefined ? `free, last token ${l.token}` : `held by ${l.holder}, token ${l.token}`
    lines.push(`  ${l.name}  ${held}${l.waiters.length === 0 ? "" : `, waiting: ${l.waiters.join(" ")}`}`)
  }
  lines.push(`groups (${inventory.groups.length})`)
  for (const g of inventory.groups) lines.push(`  ${g.group}  members: ${g.members.join(" ")}`)
  return lines.join("\n")
}

const print = (text: string): Effect.Effect<void> => Effect.sync(() => void process.stdout.write(`${text}\n`))

/** `simba status`: prints the inventory once. */
export const status = (backend: LeaseBackendService, json: boolean): Effect.Effect<void, unknown> =>
  Effect.flatMap(inventoryOf(backend), (inventory) =>
    print(json ? JSON.stringify(toJson(backend.backend, inventory), null, 2) : toText(backend.backend, inventory)))

/** One change between two inventories. */
export type Change =
  | { readonly event: "SessionOpened"; readonly sessionId: string }
  | { readonly event: "SessionEnded"; readonly sessionId: string }
  | { readonly event: "LeaseHeld"; readonly name: string; readonly holder: string; readonly token: string }
  | { readonly event: "LeaseFreed"; readonly name: string; readonly token: string }
  | { readonly event: "WaitersChanged"; readonly name: string; readonly waiters: ReadonlyArray<string> }
  | { readonly event: "GroupView"; readonly group: string; readonly members: ReadonlyArray<string> }

const sameList = (a: ReadonlyArray<string>, b: ReadonlyArray<string>) => a.length === b.length && a.every((x, i) => x === b[i])

/**
 * What changed from `before` to `after`, restricted to the lease or group `name` when given (sessions
 * then only through the leases and groups they hold). A free name that disappears (ZooKeeper drops
 * the node of a released lease) is freed.
 */
export const changes = (before: Inventory, after: Inventory, name: Option.Option<string>): ReadonlyArray<Change> => {
  const out: Array<Change> = []
  const wanted = (n: string) => Option.isNone(name) || name.value === n
  if (Option.isNone(name)) {
    const was = new Set(before.sessions.map((s) => s.sessionId))
    const is = new Set(after.sessions.map((s) => s.sessionId))
    for (const id of is) if (!was.has(id)) out.push({ event: "SessionOpened", sessionId: id })
    for (const id of was) if (!is.has(id)) out.push({ event: "SessionEnded", sessionId: id })
  }
  const leasesBefore = new Map(before.leases.map((l) => [l.name, l]))
  const leasesAfter = new Map(after.leases.map((l) => [l.name, l]))
  for (const [n, l] of leasesAfter) {
    if (!wanted(n)) continue
    const old = leasesBefore.get(n)
    if (l.holder !== undefined && (old?.holder !== l.holder || old.token !== l.token)) {
      out.push({ event: "LeaseHeld", name: n, holder: l.holder, token: l.token.toString() })
    }
    if (l.holder === undefined && old?.holder !== undefined) out.push({ event: "LeaseFreed", name: n, token: old.token.toString() })
    if (!sameList(old?.waiters ?? [], l.waiters)) out.push({ event: "WaitersChanged", name: n, waiters: l.waiters })
  }
  for (const [n, old] of leasesBefore) {
    if (!wanted(n) || leasesAfter.has(n)) continue
    if (old.holder !== undefined) out.push({ event: "LeaseFreed", name: n, token: old.token.toString() })
    if (old.waiters.length > 0) out.push({ event: "WaitersChanged", name: n, waiters: [] })
  }
  const groupsBefore = new Map(before.groups.map((g) => [g.group, g.members]))
  const groupsAfter = new Map(after.groups.map((g) => [g.group, g.members]))
  for (const [g, members] of groupsAfter) {
    if (wanted(g) && !sameList(groupsBefore.get(g) ?? [], members)) out.push({ event: "GroupView", group: g, members })
  }
  for (const g of groupsBefore.keys()) if (wanted(g) && !groupsAfter.has(g)) out.push({ event: "GroupView", group: g, members: [] })
  return out
}

const changeText = (change: Change): string => {
  switch (change.event) {
    case "SessionOpened":
    case "SessionEnded":
      return `${change.event} session=${change.sessionId}`
    case "LeaseHeld":
      return `LeaseHeld name=${change.name} holder=${change.holder} token=${change.token}`
    case "LeaseFreed":
      return `LeaseFreed name=${change.name} token=${change.token}`
    case "WaitersChanged":
      return `WaitersChanged name=${change.name} waiters=${change.waiters.join(",")}`
    case "GroupView":
      return `GroupView group=${change.group} members=${change.members.join(",")}`
  }
}

const emptyInventory: Inventory = { sessions: [], leases: [], groups: [] }

/**
 * `simba watch`: reads the inventory every `every` and prints a line per change (the first read
 * against an empty store, so the current state comes first), until interrupted. A read that fails
 * is reported on stderr and retried at the next tick: a watcher outlives a store's restart.
 */
export const watch = (
  backend: LeaseBackendService,
  name: Option.Option<string>,
  json: boolean,
  every: Duration.Duration
): Effect.Effect<never, unknown> =>
  Effect.gen(function*() {
    let last = emptyInventory
    let failing = false
    while (true) {
      const read = yield* Effect.either(inventoryOf(backend))
      const at = new Date(yield* Clock.currentTimeMillis).toISOString()
      if (read._tag === "Left") {
        if (read.left instanceof UsageError) return yield* Effect.fail(read.left)
        if (!failing) {
          const text = read.left instanceof Error ? read.left.message : String(read.left)
          yield* Effect.sync(() => void process.stderr.write(`simba: ${at} reading the store failed: ${text}\n`))
        }
        failing = true
      } else {
        failing = false
        for (const change of changes(last, read.right, name)) {
          yield* print(json ? JSON.stringify({ at, ...change }) : `${at} ${changeText(change)}`)
        }
        last = read.right
      }
      yield* Effect.sleep(every)
    }
  })
