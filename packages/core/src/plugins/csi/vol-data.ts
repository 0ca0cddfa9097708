/**
 * `vol_data.json`: what the kubelet writes next to a CSI volume so unmount, unstage and restart
 * reconstruction know the driver and handle without the API (SPEC §7.7). Keys are the kubelet's.
 */
import { isHostError } from '../../errors.js'
import type { Host } from '../../host/host.js'
import type { VolumeSpec } from '../../api/volume-spec.js'
import { basename, dirname, joinPath } from '../../paths.js'
import { decodeUtf8 } from '../../text.js'
import { runFileSteps } from '../util/file-steps.js'

export const VOL_DATA_FILE = 'vol_data.json'

/** The kubelet's keys; staging data carries only `driverName` and `volumeHandle`. */
export interface VolData {
  readonly specVolID?: string
  readonly volumeHandle: string
  readonly driverName: string
  readonly nodeName?: string
  readonly attachmentID?: string
  readonly volumeLifecycleMode?: 'Persistent' | 'Ephemeral'
  readonly seLinuxMountContext?: string
}

/**
 * `mkdir -p` of `mountDir` (0750), then `dataDir/vol_data.json` written (0640), as the kubelet
 * makes them before staging or publishing: one host call where the host has `fileSteps`.
 */
export async function makeDirWithVolData(host: Host, mountDir: string, dataDir: string, data: VolData): Promise<void> {
  await runFileSteps(host, [
    { op: 'mkdir', path: mountDir, recursive: true, mode: 0o750 },
    { op: 'writeFile', path: joinPath(dataDir, VOL_DATA_FILE), data: JSON.stringify(data), mode: 0o640 },
  ])
}

/** Reads `dir/vol_data.json`; null when it does not exist. Throws on malformed content. */
export async function loadVolData(host: Host, dir: string): Promise<VolData | null> {
  let bytes: Uint8Array
  try {
    bytes = await host.readFile(joinPath(dir, VOL_DATA_FILE))
  } catch (err) {
    if (isHostError(err, 'ENOENT', 'ENOTDIR')) return null
    throw err
  }
  const data = JSON.parse(decodeUtf8(bytes)) as Partial<VolData>
  if (typeof data.driverName !== 'string' || typeof data.volumeHandle !== 'string') {
    throw new Error(`${joinPath(dir, VOL_DATA_FILE)} has no driverName or volumeHandle`)
  }
  return data as VolData
}

/**
 * A volume's spec rebuilt from the `vol_data.json` beside its mount (SPEC §7.7 `ConstructVolumeSpec`):
 * a PV spec with the driver and handle for a persistent volume, an inline spec for an ephemeral one.
 */
export async function volumeSpecFromVolData(host: Host, innerName: string, mountPath: string): Promise<VolumeSpec> {
  const dir = basename(mountPath) === 'mount' ? dirname(mountPath) : mountPath
  const data = await loadVolData(host, dir)
  if (!data) throw new Error(`failed to reconstruct CSI volume ${innerName}: no vol_data.json in ${dir}`)
  const name = data.specVolID || innerName
  if (data.volumeLifecycleMode === 'Ephemeral') return { name, volume: { name, csi: { driver: data.driverName } }, readOnly: false }
  return {
    name,
    persistentVolume: { metadata: { name }, spec: { csi: { driver: data.driverName, volumeHandle: data.volumeHandle } } },
    readOnly: false,
  }
}
