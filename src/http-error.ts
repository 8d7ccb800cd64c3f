// An error that already knows its HTTP status and a message fit for the client.
export class HttpError extends Error {
  constructor (readonly statusCode: number, message: string) {
    super(message)
    this.name = 'HttpError'
  }
}
