/**
 * `Status` bodies as the API server sends them with every failure (and inside a watch's ERROR event).
 */

/** A failure `Status` object. */
export interface StatusBody {
  readonly kind: 'Status'
  readonly apiVersion: 'v1'
  readonly metadata: Record<string, never>
  readonly status: 'Failure'
  readonly message: string
  readonly reason: string
  readonly details?: { readonly name?: string; readonly group?: string; readonly kind?: string }
  readonly code: number
}

/** Builds a failure Status. */
export function statusBody(code: number, reason: string, message: string, details?: StatusBody['details']): StatusBody {
  return { kind: 'Status', apiVersion: 'v1', metadata: {}, status: 'Failure', message, reason, ...(details ? { details } : {}), code }
}

/** An error carrying a Status, thrown inside the fake and answered as it says. */
export class StatusError extends Error {
  readonly body: StatusBody
  constructor(body: StatusBody) {
    super(body.message)
    this.body = body
  }
}

const group = (g: string) => (g ? { group: g } : {})

export const notFound = (resource: string, name: string, g = ''): StatusError =>
  new StatusError(statusBody(404, 'NotFound', `${resource}${g ? `.${g}` : ''} "${name}" not found`, { name, ...group(g), kind: resource }))

export const alreadyExists = (resource: string, name: string, g = ''): StatusError =>
  new StatusError(statusBody(409, 'AlreadyExists', `${resource}${g ? `.${g}` : ''} "${name}" already exists`, { name, ...group(g), kind: resource }))

export const conflict = (resource: string, name: string, detail = 'the object has been modified; please apply your changes to the latest version and try again'): StatusError =>
  new StatusError(statusBody(409, 'Conflict', `Operation cannot be fulfilled on ${resource} "${name}": ${detail}`, { name, kind: resource }))

export const badRequest = (message: string): StatusError => new StatusError(statusBody(400, 'BadRequest', message))

export const unsupportedMediaType = (): StatusError => new StatusError(statusBody(415, 'UnsupportedMediaType', '415: Unsupported Media Type'))

export const unauthorized = (): StatusError => new StatusError(statusBody(401, 'Unauthorized', 'Unauthorized'))

export const methodNotAllowed = (): StatusError => new StatusError(statusBody(405, 'MethodNotAllowed', 'the server does not allow this method on the requested resource'))
