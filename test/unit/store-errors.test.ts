import t from 'tap'
import { isTransient, isUnavailable, OutcomeUnknownError, sentWriteError, StoreUnavailableError } from '../../src/store/store-errors.js'

// What a failed write that was sent tells its caller: the database's
// refusal (severity ERROR: the statement's transaction rolled back) is 503,
// nothing stored; anything else may have come after the commit: 504.
t.test('a sent write: refused is 503, unconfirmed is 504', async (t) => {
  const refused = (code: string): Error => Object.assign(new Error('refused'), { code, severity: 'ERROR' })
  for (const code of ['25006', '57014', '53300']) {
    const err = sentWriteError(refused(code))
    t.ok(err instanceof StoreUnavailableError, `${code} with severity ERROR: 503`)
  }
  const unconfirmed = [
    new Error('Query read timeout'),
    new Error('Connection terminated unexpectedly'),
    Object.assign(new Error('read ECONNRESET'), { code: 'ECONNRESET' }),
    // A session ended while its commit waited for a standby: committed locally.
    Object.assign(new Error('terminating connection due to administrator command'), { code: '57P01', severity: 'FATAL' }),
    // The embedded thread died after COMMIT was sent.
    new StoreUnavailableError('The embedded database stopped (thread exit 1)')
  ]
  for (const cause of unconfirmed) {
    const err = sentWriteError(cause)
    t.ok(err instanceof OutcomeUnknownError && err.statusCode === 504, `${cause.message}: 504`)
    t.notOk(isUnavailable(err), 'never counted as "nothing stored"')
    t.ok(isTransient(err), 'worth sending again: the repeat is a replay')
  }
  t.ok(sentWriteError(new Error('Client has encountered a connection error and is not queryable')) instanceof StoreUnavailableError,
    'a statement pg refused to send is 503')
  const notNull = refused('23502')
  t.equal(sentWriteError(notNull), notNull, 'a statement the database rejected for its data stays that error (rows are then written alone)')
})
