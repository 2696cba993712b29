/**
 * An immutable map that iterates in insertion order, as `Map` does, and whose `set` / `delete` return
 * a new map sharing structure with the old one (O(log n) each): a HAMT (effect's `HashMap`) finds a
 * key's slot, a red-black tree (effect's `SortedMap`) keeps the slots' order. Setting a present key
 * keeps its place; deleting and setting it again moves it last (as with `Map`).
 *
 * The engine keeps its per-name and per-handle tables in these, so a step costs what it touches, not
 * what the state holds, and a state a caller still holds never changes under it.
 */
import * as HashMap from "effect/HashMap"
import * as Option from "effect/Option"
import * as Order from "effect/Order"
import * as SortedMap from "effect/SortedMap"

interface Slot<V> {
  /** Insertion rank: the key's place in iteration order. */
  readonly rank: number
  readonly value: V
}

export class OrderedMap<K, V> implements ReadonlyMap<K, V> {
  // Private (`#`) so that structural equality (vitest's `toEqual`) compares the entries, not the trees.
  readonly #slots: HashMap.HashMap<K, Slot<V>>
  readonly #ranks: SortedMap.SortedMap<number, K>
  readonly #nextRank: number

  private constructor(slots: HashMap.HashMap<K, Slot<V>>, ranks: SortedMap.SortedMap<number, K>, nextRank: number) {
    this.#slots = slots
    this.#ranks = ranks
    this.#nextRank = nextRank
  }

  static empty<K, V>(): OrderedMap<K, V> {
    return new OrderedMap<K, V>(HashMap.empty(), SortedMap.empty(Order.number), 0)
  }

  get size(): number {
    return HashMap.size(this.#slots)
  }

  get(key: K): V | undefined {
    const slot = HashMap.get(this.#slots, key)
    return Option.isSome(slot) ? slot.value.value : undefined
  }

  has(key: K): boolean {
    return HashMap.has(this.#slots, key)
  }

  set(key: K, value: V): OrderedMap<K, V> {
    const slot = HashMap.get(this.#slots, key)
    if (Option.isSome(slot)) {
      if (slot.value.value === value) return this
      return new OrderedMap(HashMap.set(this.#slots, key, { rank: slot.value.rank, value }), this.#ranks, this.#nextRank)
    }
    const rank = this.#nextRank
    return new OrderedMap(
      HashMap.set(this.#slots, key, { rank, value }),
      SortedMap.set(this.#ranks, rank, key),
      rank + 1
    )
  }

  delete(key: K): OrderedMap<K, V> {
    const slot = HashMap.get(this.#slots, key)
    if (Option.isNone(slot)) return this
    return new OrderedMap(HashMap.remove(this.#slots, key), SortedMap.remove(this.#ranks, slot.value.rank), this.#nextRank)
  }

  *keys(): Generator<K, undefined> {
    for (const key of SortedMap.values(this.#ranks)) yield key
    return undefined
  }

  *values(): Generator<V, undefined> {
    for (const key of SortedMap.values(this.#ranks)) yield (HashMap.unsafeGet(this.#slots, key)).value
    return undefined
  }

  *entries(): Generator<[K, V], undefined> {
    for (const key of SortedMap.values(this.#ranks)) yield [key, HashMap.unsafeGet(this.#slots, key).value]
    return undefined
  }

  [Symbol.iterator](): Generator<[K, V], undefined> {
    return this.entries()
  }

  forEach(callback: (value: V, key: K, map: ReadonlyMap<K, V>) => void, thisArg?: unknown): void {
    for (const [key, value] of this.entries()) callback.call(thisArg, value, key, this)
  }
}
