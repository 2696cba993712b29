/**
 * Boot markers: how the backend notices that the store lost its state (restart without persistence,
 * flush, fail-over to a replica that lacks it) and starts a lock-delay (see "Lock-delay" in
 * `RedisBackend`). Mode `node`: one key, `<prefix>:boot`. Mode `cluster`: a script may touch one slot
 * only and a node can be wiped alone, so one marker per slot, `<prefix>:boot:{tag(slot)}`, checked by
 * the scripts of that slot; when the backend finds markers missing it creates every missing one in one
 * pass, all of a node resuming at the same time, so a fresh store pays one delay, not one per slot.
 */
import * as Effect from "effect/Effect"
import type { BackendError } from "../../LeaseBackend.js"
import type { Client, Runner } from "./connection.js"
import type { Keys } from "./keys.js"
import type { Mode } from "./options.js"
import * as Scripts from "./scripts.js"
import { slotTag } from "./slots.js"

const slotCount = 16384
/** Markers created per round of a pass (bounded work per round). */
const batch = 2048

/** The slots of each master (ioredis `Cluster.slots`: per slot, its master's key first); one group on a single server. */
const slotsByNode = (client: Client): Array<Array<number>> => {
  const bySlot: ReadonlyArray<ReadonlyArray<string> | undefined> = "slots" in client ? client.slots : []
  const groups = new Map<string, Array<number>>()
  for (let slot = 0; slot < slotCount; slot++) {
    const node = bySlot[slot]?.[0] ?? ""
    const group = groups.get(node)
    if (group === undefined) groups.set(node, [slot])
    else group.push(slot)
  }
  return [...groups.values()]
}

/**
 * Creates the missing markers with a lock-delay of `delayMs`. Mode `cluster`: per node, the marker of
 * its first slot first; the node's other slots only when that one was missing or `all`, resuming at
 * its time when it was just created.
 */
const pass = (
  mode: Mode,
  k: Keys,
  { run, runAll }: Runner,
  client: Client,
  delayMs: number,
  all: boolean
): Effect.Effect<void, BackendError> => {
  if (mode === "node") return Effect.asVoid(run("bootMarker", Scripts.bootMarker({ marker: k.boot }, { delayMs, resumeAt: "" })))
  const marker = (slot: number, resumeAt: string) => Scripts.bootMarker({ marker: k.bootIn(slotTag(slot)) }, { delayMs, resumeAt })
  return Effect.forEach(slotsByNode(client), ([first, ...rest]) =>
    Effect.gen(function*() {
      const [created, resume] = yield* run("bootMarker", marker(first!, ""))
      if (created === 0 && !all) return
      const resumeAt = created === 1 ? resume : ""
      for (let i = 0; i < rest.length; i += batch) {
        yield* runAll("bootMarker", rest.slice(i, i + batch).map((slot) => marker(slot, resumeAt)))
      }
    }), { concurrency: "unbounded", discard: true })
}

/** At start: creates the markers of every node (mode `node`: the store) found without its first one. */
export const markOnStart = (mode: Mode, k: Keys, runner: Runner, client: Client, delayMs: number) =>
  pass(mode, k, runner, client, delayMs, false)

/** After a script found a marker missing: creates every missing marker. */
export const markAll = (mode: Mode, k: Keys, runner: Runner, client: Client, delayMs: number) =>
  pass(mode, k, runner, client, delayMs, true)
