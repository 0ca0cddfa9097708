/** The agent's version, as its package.json says (checked by a test). */
export const AGENT_VERSION = '0.1.0'
