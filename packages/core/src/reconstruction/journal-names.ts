/**
 * Journaled volumes under the unique names kubevol gives them now. A journal written before a
 * plugin changed how it names its volumes (fileDisk's `kubevol.io/file-disk/<image>` became the CSI
 * form `kubernetes.io/csi/filedisk.kubevol.io^<image>`) holds them under the old name: reconstructed
 * so, the volume would be one the pods do not want (torn down under them) beside one they do
 * (mounted again over the same paths). Each such volume's live records are written again under
 * its current name, then the old name is closed, before reconstruction reads the journal.
 */
import { uniqueVolumeNameOf } from '../plugins/plugin-manager.js'
import type { PluginManager } from '../plugins/plugin-manager.js'
import type { JournalRecord, JournalVolume, VolumeJournal } from '../journal/journal.js'
import type { Logger } from '../observability.js'
import { errorMessage } from '../errors.js'

/** The volume's current unique name, or undefined when it cannot be told (no plugin for its spec). */
function currentName(plugins: PluginManager, v: JournalVolume): string | undefined {
  try {
    const plugin = plugins.findPluginBySpec(v.spec)
    // A per-pod volume has one pod; its name needs it. A shared one does not.
    const [podName = ''] = [...v.pods.keys()]
    return uniqueVolumeNameOf(plugin, v.spec, podName)
  } catch {
    return undefined
  }
}

/** The records that say what the volume holds, under `name`. */
function recordsUnder(name: string, v: JournalVolume): JournalRecord[] {
  const records: JournalRecord[] = []
  if (v.attached) records.push({ kind: 'attached', volume: name, spec: v.spec, devicePath: v.attached.devicePath })
  if (v.device) records.push({ kind: 'device', volume: name, spec: v.spec, ...v.device })
  for (const [pod, p] of v.pods) records.push({ kind: 'setup', volume: name, pod, ...p })
  return records
}

/**
 * Renames journaled volumes whose unique name changed. The new records are durable before the old
 * name is closed, so a crash in between leaves both, and the next start renames again (records
 * are idempotent). A read-only journal (a dry run) is left as it is. Never throws.
 */
export async function renameJournaledVolumes(journal: VolumeJournal, plugins: PluginManager, logger: Logger): Promise<void> {
  for (const v of journal.volumes().values()) {
    const name = currentName(plugins, v)
    if (name === undefined || name === v.volume) continue
    try {
      await Promise.all(recordsUnder(name, v).map((record) => journal.record(record)))
      journal.note({ kind: 'detached', volume: v.volume })
      logger.info('Journaled volume renamed to its current unique name', { from: v.volume, to: name })
    } catch (err) {
      logger.warn('Could not rename a journaled volume', { volume: v.volume, to: name, err: errorMessage(err) })
    }
  }
  await journal.flush()
}
