/**
 * A map for the pods of one volume. Almost every volume on a node has exactly one pod (emptyDir,
 * configMap, secret, projected, a claim used by one pod), and a V8 `Map` costs a few hundred bytes
 * even when it holds one entry; with 100,000 volumes the caches held three of them per volume. This
 * keeps a single entry inline and turns into a `Map` only for a second one. Insertion order is kept,
 * as a `Map` keeps it.
 */

/** `#key` of a map with no entry. */
const NONE: unique symbol = Symbol('none')
/** `#key` of a map whose entries moved to the `Map` in `#value`. */
const MANY: unique symbol = Symbol('many')

/** What `Map.prototype.keys()` returns, for entries of type `T`; an array's iterator has the same members at run time. */
type MapIteratorOf<T> = ReturnType<Map<T, unknown>['keys']>

export class SmallMap<K, V> implements ReadonlyMap<K, V> {
  // Two fields rather than key, value, size and map: every volume holds one of these per cache.
  #key: K | typeof NONE | typeof MANY = NONE
  #value: V | Map<K, V> | undefined = undefined

  // No private method or accessor here: V8 gives every instance of a class with one a hidden
  // brand field, 8 bytes on each of 100,000 volumes' entries. Each method reads the two fields itself.

  get size(): number {
    const map = this.#key === MANY ? (this.#value as Map<K, V>) : undefined
    if (map) return map.size
    return this.#key === NONE ? 0 : 1
  }

  has(key: K): boolean {
    const map = this.#key === MANY ? (this.#value as Map<K, V>) : undefined
    return map ? map.has(key) : this.#key === key
  }

  get(key: K): V | undefined {
    const map = this.#key === MANY ? (this.#value as Map<K, V>) : undefined
    if (map) return map.get(key)
    return this.#key === key ? (this.#value as V) : undefined
  }

  set(key: K, value: V): this {
    const map = this.#key === MANY ? (this.#value as Map<K, V>) : undefined
    if (map) {
      map.set(key, value)
    } else if (this.#key === NONE || this.#key === key) {
      this.#key = key
      this.#value = value
    } else {
      this.#value = new Map([
        [this.#key as K, this.#value as V],
        [key, value],
      ])
      this.#key = MANY
    }
    return this
  }

  delete(key: K): boolean {
    const map = this.#key === MANY ? (this.#value as Map<K, V>) : undefined
    if (map) return map.delete(key)
    if (this.#key !== key) return false
    this.#key = NONE
    this.#value = undefined
    return true
  }

  // Iteration without generators: the reconciler iterates these on every pass, and a generator
  // with its result objects was most of the garbage a pass made.
  // The return types are Map's own, whatever the consumer's TypeScript and @types/node make of
  // them (`IterableIterator` before TypeScript 5.6, `MapIterator` after, with `[Symbol.dispose]`
  // from @types/node 24): a type written here would break `implements ReadonlyMap` for some of them.
  keys(): MapIteratorOf<K> {
    const map = this.#key === MANY ? (this.#value as Map<K, V>) : undefined
    if (map) return map.keys()
    return (this.#key === NONE ? [] : [this.#key as K]).values() as MapIteratorOf<K>
  }

  values(): MapIteratorOf<V> {
    const map = this.#key === MANY ? (this.#value as Map<K, V>) : undefined
    if (map) return map.values()
    return (this.#key === NONE ? [] : [this.#value as V]).values() as MapIteratorOf<V>
  }

  entries(): MapIteratorOf<[K, V]> {
    return this[Symbol.iterator]()
  }

  forEach(callback: (value: V, key: K, map: ReadonlyMap<K, V>) => void, thisArg?: unknown): void {
    const map = this.#key === MANY ? (this.#value as Map<K, V>) : undefined
    if (map) {
      for (const [key, value] of map) callback.call(thisArg, value, key, this)
    } else if (this.#key !== NONE) {
      callback.call(thisArg, this.#value as V, this.#key as K, this)
    }
  }

  [Symbol.iterator](): MapIteratorOf<[K, V]> {
    const map = this.#key === MANY ? (this.#value as Map<K, V>) : undefined
    if (map) return map.entries()
    return (this.#key === NONE ? [] : [[this.#key as K, this.#value as V] as [K, V]]).values() as MapIteratorOf<[K, V]>
  }
}
