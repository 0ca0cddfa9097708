/**
 * A map for the pods of one volume. Almost every volume on a node has exactly one pod (emptyDir,
 * configMap, secret, projected, a claim used by one pod), and a V8 `Map` costs a few hundred bytes
 * even when it holds one entry; with 100,000 volumes the caches held three of them per volume. This
 * keeps a single entry inline and turns into a `Map` only for a second one. Insertion order is kept,
 * as a `Map` keeps it.
 */
export class SmallMap<K, V> implements ReadonlyMap<K, V> {
  #size = 0
  #key: K | undefined
  #value: V | undefined
  #map: Map<K, V> | undefined

  get size(): number {
    return this.#map ? this.#map.size : this.#size
  }

  has(key: K): boolean {
    if (this.#map) return this.#map.has(key)
    return this.#size === 1 && this.#key === key
  }

  get(key: K): V | undefined {
    if (this.#map) return this.#map.get(key)
    return this.#size === 1 && this.#key === key ? this.#value : undefined
  }

  set(key: K, value: V): this {
    if (this.#map) {
      this.#map.set(key, value)
    } else if (this.#size === 0 || this.#key === key) {
      this.#key = key
      this.#value = value
      this.#size = 1
    } else {
      this.#map = new Map([[this.#key as K, this.#value as V]])
      this.#map.set(key, value)
      this.#key = undefined
      this.#value = undefined
    }
    return this
  }

  delete(key: K): boolean {
    if (this.#map) return this.#map.delete(key)
    if (this.#size === 1 && this.#key === key) {
      this.#key = undefined
      this.#value = undefined
      this.#size = 0
      return true
    }
    return false
  }

  *keys(): IterableIterator<K> {
    for (const [key] of this) yield key
  }

  *values(): IterableIterator<V> {
    for (const [, value] of this) yield value
  }

  entries(): IterableIterator<[K, V]> {
    return this[Symbol.iterator]()
  }

  forEach(callback: (value: V, key: K, map: ReadonlyMap<K, V>) => void, thisArg?: unknown): void {
    for (const [key, value] of this) callback.call(thisArg, value, key, this)
  }

  *[Symbol.iterator](): IterableIterator<[K, V]> {
    if (this.#map) {
      yield* this.#map
    } else if (this.#size === 1) {
      yield [this.#key as K, this.#value as V]
    }
  }
}
