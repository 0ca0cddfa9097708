/** Test helpers of the CSI plugin: the in-memory CSI node driver. */
export * from './memory-csi-driver.js'
