/**
 * The playground's tour: the page's "things to try", played one after another on the engine.
 * Each step acts, then waits until the engine's view shows what the step promises. The page plays
 * it on the real clock; a Node test plays it on a fake clock and the browser test in Chromium, so
 * the tour cannot promise what the engine does not do.
 */
import type { Playground, PlaygroundView } from './engine.js'

export interface TourStep {
  /** What the reader should watch for, in a sentence. */
  readonly caption: string
  act(playground: Playground): void | Promise<void>
  /** The step has converged when this holds for the engine's view. */
  done(view: PlaygroundView): boolean
}

const ready = (view: PlaygroundView, name: string): boolean => view.pods.some((p) => p.name === name && p.ready)
const allReady = (view: PlaygroundView): boolean => view.pods.length > 0 && view.pods.every((p) => p.ready)

export const TOUR: readonly TourStep[] = [
  {
    caption: 'Pod web with a disk, an emptyDir and a configMap: the disk is attached (volume_attach), then mounted (volume_mount: device mount, then setup).',
    act: (p) => void p.addPod('web', ['disk', 'emptyDir', 'configMap']),
    done: (v) => ready(v, 'web'),
  },
  {
    caption: "The next setUp fails 3 times, then pod db arrives with a scratch volume: it backs off 0.5 s, 1 s and 2 s, and mounts on the fourth try.",
    act: (p) => {
      p.injectFault('setUp', 'fail-3')
      p.addPod('db', ['scratch'])
    },
    done: (v) => ready(v, 'db'),
  },
  {
    caption: 'The next setUp ends uncertain, then pod cache arrives: its volume is uncertain (it may be mounted), and the next pass mounts it again.',
    act: (p) => {
      p.injectFault('setUp', 'uncertain')
      p.addPod('cache', ['scratch'])
    },
    done: (v) => ready(v, 'cache'),
  },
  {
    caption: 'Crash and restart: the new manager reconstructs what is mounted from the journal and the pods directory, and every pod keeps its volumes.',
    act: (p) => p.crashAndRestart(),
    done: (v) => v.restarts > 0 && allReady(v),
  },
  {
    caption: 'Every pod deleted: the volumes are torn down, the device unmounted and the disk detached.',
    act: (p) => {
      for (const pod of p.view().pods) p.removePod(pod.uid)
    },
    done: (v) => v.pods.length === 0 && v.mounted.length === 0 && v.attached.length === 0,
  },
]

/**
 * Plays the tour: for each step, `onStep(index)`, the step's act, then `wait(done)`, which resolves
 * true once `done` holds (false when it gave up). Returns how many steps converged, stopping at the
 * first that did not.
 */
export async function playTour(
  playground: Playground,
  wait: (done: (view: PlaygroundView) => boolean) => Promise<boolean>,
  onStep: (index: number) => void = () => {},
): Promise<number> {
  for (const [index, step] of TOUR.entries()) {
    onStep(index)
    await step.act(playground)
    if (!(await wait(step.done))) return index
  }
  return TOUR.length
}
