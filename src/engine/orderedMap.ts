/**
 * An immutable map that iterates in insertion order, as `Map` does: `set` / `delete` return a new
 * map and never change the one they are called on. Setting a present key keeps its place; deleting
 * and setting it again moves it last (as with `Map`).
 *
 * The engine keeps its per-name and per-handle tables in these, so a step costs what it touches, not
 * what the state holds, and a state a caller still holds never changes under it.
 *
 * How (a "rerooting" persistent map, Baker's trick): all versions made from one `empty()` share one
 * native `Map`, owned by one version at a time (the root); every other version holds the one change
 * that turns the version it points to into itself. `set` / `delete` on the root change the shared
 * `Map` in place and leave the old version as a one-change record pointing to the new one: O(1), no
 * copying. An older version answers `get` / `has` through its records (the first record of the key on
 * the way to the root, else the `Map`); changing or iterating it first walks its changes back into
 * the shared `Map` (reversing the records on the way, so the previous root is then the one pointing
 * back). The engine and the shell change only the newest state, so they never pay that walk; a test
 * that steps one state twice pays it once per switch. An old version keeps alive the records from it
 * to the root (one per change made since), as long as someone holds it; a holder that moves on for
 * good drops them with `supersededBy`.
 *
 * Each entry carries its insertion rank: a walk that puts a deleted key back appends it, and the
 * `Map` is then re-sorted by rank, so an older version iterates in its own order.
 *
 * Iterators (`keys`, `values`, `entries`) copy the version's entries when called: a loop over a
 * version can go on while the loop makes newer ones.
 */

interface Slot<V> {
  /** Insertion rank: the key's place in iteration order. */
  readonly rank: number
  readonly value: V
}

function* each<A>(items: ReadonlyArray<A>): Generator<A, undefined> {
  for (const item of items) yield item
  return undefined
}

export class OrderedMap<K, V> implements ReadonlyMap<K, V> {
  // Private (`#`) so that structural equality (vitest's `toEqual`) compares the entries (through the
  // iterator), not the shared `Map` or the change records.
  /** The shared entries, when this version is the root. */
  #store: Map<K, Slot<V>> | undefined
  /** Else: this version is the version `#next` with `#key` set to `#slot` (absent when undefined). */
  #key: K | undefined
  #slot: Slot<V> | undefined
  #next: OrderedMap<K, V> | undefined
  readonly #size: number
  readonly #nextRank: number

  private constructor(store: Map<K, Slot<V>>, size: number, nextRank: number) {
    this.#size = size
    this.#nextRank = nextRank
    this.#becomeRoot(store)
  }

  /** This version owns the shared `Map`. */
  #becomeRoot(store: Map<K, Slot<V>>): void {
    this.#store = store
    this.#key = undefined
    this.#slot = undefined
    this.#next = undefined
  }

  /** This version is `next` with `key` set to `slot` (absent when undefined). */
  #becomeRecord(key: K, slot: Slot<V> | undefined, next: OrderedMap<K, V>): void {
    this.#store = undefined
    this.#key = key
    this.#slot = slot
    this.#next = next
  }

  static empty<K, V>(): OrderedMap<K, V> {
    return new OrderedMap<K, V>(new Map(), 0, 0)
  }

  /** The shared entries, this version made the root first if it is not. */
  #own(): Map<K, Slot<V>> {
    if (this.#store !== undefined) return this.#store
    const chain: Array<OrderedMap<K, V>> = []
    let root: OrderedMap<K, V> = this
    while (root.#store === undefined) {
      chain.push(root)
      root = root.#next ?? superseded()
    }
    const store = root.#store
    let appended = false
    // From the version next to the root back to this one: each takes the `Map` over, and the version
    // it took it from keeps the change that gives back its own entries.
    for (let i = chain.length - 1; i >= 0; i--) {
      const version = chain[i]!
      const previous = version.#next!
      const key = version.#key as K
      const current = store.get(key)
      const wanted = version.#slot
      if (wanted === undefined) store.delete(key)
      else {
        if (current === undefined) appended = true
        store.set(key, wanted)
      }
      previous.#becomeRecord(key, current, version)
      version.#becomeRoot(store)
    }
    if (appended) sortByRank(store)
    return store
  }

  /** Makes this version (the root) a record of how to get it back from `next`, which now owns `store`. */
  #handOver(store: Map<K, Slot<V>>, key: K, slot: Slot<V> | undefined, size: number, nextRank: number): OrderedMap<K, V> {
    const next = new OrderedMap<K, V>(store, size, nextRank)
    this.#becomeRecord(key, slot, next)
    return next
  }

  /**
   * Drops the change records that lead from this version to `newer`, when `newer` is reached by
   * them: after that, this version and every version between are dead (using one is a defect), and
   * none of them keeps a newer version or an old value alive. For a holder of only the newest
   * version (the shell's loop, `Engine.supersede`): a record that lived long enough to be moved to
   * the old generation of the heap would otherwise keep every later version, and the values they
   * replaced, alive through young-generation collections until a full collection (a client taking a
   * cached lock in a loop promoted ~750 KB at each of them, ~280 KB with this).
   */
  supersededBy(newer: OrderedMap<K, V>): void {
    if (this === newer) return
    let version: OrderedMap<K, V> = this
    while (version !== newer) {
      if (version.#store !== undefined) return
      version = version.#next!
    }
    version = this
    while (version !== newer) {
      const next = version.#next!
      version.#key = undefined
      version.#slot = undefined
      version.#next = undefined
      version = next
    }
  }

  get size(): number {
    return this.#size
  }

  /**
   * `key`'s slot in this version. An older version is read through its change records (the first one
   * of `key` on the way to the root has it), without moving the `Map`: a step that reads an earlier
   * version between changes to the newest (a reconciliation comparing "before" with "now") would
   * otherwise walk the changes back and forth on every read.
   */
  #slotOf(key: K): Slot<V> | undefined {
    let version: OrderedMap<K, V> = this
    while (version.#store === undefined) {
      if (sameKey(version.#key as K, key)) return version.#slot
      version = version.#next ?? superseded()
    }
    return version.#store.get(key)
  }

  get(key: K): V | undefined {
    return this.#slotOf(key)?.value
  }

  has(key: K): boolean {
    return this.#slotOf(key) !== undefined
  }

  set(key: K, value: V): OrderedMap<K, V> {
    const store = this.#own()
    const current = store.get(key)
    if (current !== undefined) {
      if (current.value === value) return this
      store.set(key, { rank: current.rank, value })
      return this.#handOver(store, key, current, this.#size, this.#nextRank)
    }
    store.set(key, { rank: this.#nextRank, value })
    return this.#handOver(store, key, undefined, this.#size + 1, this.#nextRank + 1)
  }

  delete(key: K): OrderedMap<K, V> {
    const store = this.#own()
    const current = store.get(key)
    if (current === undefined) return this
    store.delete(key)
    return this.#handOver(store, key, current, this.#size - 1, this.#nextRank)
  }

  /** The first key in iteration order (the oldest), without copying the entries. */
  first(): K | undefined {
    for (const key of this.#own().keys()) return key
    return undefined
  }

  /**
   * The keys of this version's shared `Map`, read lazily as the `Map` changes: what iterating a
   * `Map` gives while the loop changes it (a key deleted before it is reached is skipped, one set
   * meanwhile comes last). Only for a loop that changes nothing but the newest version of this map
   * (any other change or iteration may move the `Map` under it); `keys()` is a copy.
   */
  liveKeys(): IterableIterator<K> {
    return this.#own().keys()
  }

  keys(): Generator<K, undefined> {
    return each(Array.from(this.#own().keys()))
  }

  values(): Generator<V, undefined> {
    return each(Array.from(this.#own().values(), (slot) => slot.value))
  }

  entries(): Generator<[K, V], undefined> {
    return each(Array.from(this.#own(), ([key, slot]): [K, V] => [key, slot.value]))
  }

  [Symbol.iterator](): Generator<[K, V], undefined> {
    return this.entries()
  }

  forEach(callback: (value: V, key: K, map: ReadonlyMap<K, V>) => void, thisArg?: unknown): void {
    for (const [key, value] of this.entries()) callback.call(thisArg, value, key, this)
  }
}

/** A version whose records `supersededBy` dropped was used: a defect of its caller. */
const superseded = (): never => {
  throw new Error("OrderedMap: this version was superseded (supersededBy) and cannot be read any more")
}

/** Key equality as `Map` has it (SameValueZero: `NaN` is itself). */
const sameKey = <K>(a: K, b: K): boolean => a === b || (a !== a && b !== b)

/** Puts `store`'s entries back in rank order, if a key was appended out of it. */
const sortByRank = <K, V>(store: Map<K, Slot<V>>): void => {
  let last = Number.NEGATIVE_INFINITY
  let sorted = true
  for (const slot of store.values()) {
    if (slot.rank < last) {
      sorted = false
      break
    }
    last = slot.rank
  }
  if (sorted) return
  const entries = Array.from(store).sort((a, b) => a[1].rank - b[1].rank)
  store.clear()
  for (const [key, slot] of entries) store.set(key, slot)
}
