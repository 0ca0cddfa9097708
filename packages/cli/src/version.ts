/** The CLI's version (the package's). */
export const CLI_VERSION = '0.1.0'
