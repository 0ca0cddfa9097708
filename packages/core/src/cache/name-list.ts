/**
 * The volumes of one pod, as the caches index them. A pod has about ten volumes, and a `Set` of ten
 * names costs about 370 bytes (its hash table is sized for sixteen); an array of exactly ten costs
 * about a third of that. Past {@link maxListLength} names the list turns into a `Set`, so a pod with
 * very many volumes keeps constant-time membership. Insertion order is kept, as a `Set` keeps it.
 */

/** An array for a few names, a `Set` for many. Read it with `for … of`; change it only through the functions below. */
export type NameList<T> = readonly T[] | ReadonlySet<T>

/** Names a list holds before it becomes a `Set`. */
export const maxListLength = 32

/** A list holding only `name`. */
export function nameListOf<T>(name: T): NameList<T> {
  return [name]
}

/**
 * The list with `name` added (no-op when present). An array is never changed: a new one is made,
 * sized exactly by `concat` (one grown by `push` or a spread keeps room for about twenty more), so a list being
 * iterated is not changed under its reader. A `Set` is changed in place.
 */
export function addName<T>(list: NameList<T>, name: T): NameList<T> {
  if (!Array.isArray(list)) {
    ;(list as Set<T>).add(name)
    return list
  }
  const array = list as readonly T[]
  if (array.includes(name)) return array
  if (array.length < maxListLength) return array.concat([name])
  const set = new Set(array)
  set.add(name)
  return set
}

/** The list without `name` (the same list when it was not there); an array is copied, a `Set` changed in place. */
export function deleteName<T>(list: NameList<T>, name: T): NameList<T> {
  if (!Array.isArray(list)) {
    ;(list as Set<T>).delete(name)
    return list
  }
  const array = list as readonly T[]
  const at = array.indexOf(name)
  if (at < 0) return array
  return array.slice(0, at).concat(array.slice(at + 1))
}

/** Number of names. */
export function nameCount<T>(list: NameList<T>): number {
  return Array.isArray(list) ? list.length : (list as ReadonlySet<T>).size
}
