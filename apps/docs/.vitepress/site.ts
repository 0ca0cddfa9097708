/** The repository the site documents, and the line every page's footer carries. */
export const REPOSITORY = 'https://github.com/kubevol/kubevol'
export const LICENSE_LINE = `kubevol is released under the <a href="${REPOSITORY}/blob/main/LICENSE">Apache License 2.0</a>.`
