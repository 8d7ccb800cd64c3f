import t from 'tap'
import { loggerOptions } from '../../src/logger.js'
import { forEachBackend, jsonHeaders, listeningTestApp } from '../helper.js'
import { request } from '../support/http.js'

// A database error can carry the row it refused ("Failing row contains
// (…)") or a message a trigger built from it. The log keeps what an
// operator needs (SQLSTATE, constraint, table) and never the plant's data.
const NAME = 'Secret Fern 7f3a'
const TAG = 'hidden-tag-91c2'

forEachBackend(t, 'database errors in the log', async (t, backend) => {
  const lines: string[] = []
  const { app, port } = await listeningTestApp(t, backend, {
    logger: { ...(loggerOptions({ logLevel: 'trace', production: true }) as object), stream: { write: (line: string) => { lines.push(line) } } }
  })
  const post = async (id: number, name: string) => await request(`http://127.0.0.1:${port}/plants`, {
    method: 'POST', headers: jsonHeaders(), body: JSON.stringify({ id, name, tag: TAG })
  })

  await app.db.exec(`ALTER TABLE plants ADD CONSTRAINT plants_name_allowed CHECK (name <> '${NAME}')`)
  await app.db.exec(`
    CREATE FUNCTION refuse_plant() RETURNS trigger LANGUAGE plpgsql AS $$
    BEGIN
      IF NEW.name = '${NAME} by trigger' THEN
        RAISE EXCEPTION 'refusing plant %', NEW.name USING DETAIL = 'tag ' || NEW.tag, HINT = NEW.name;
      END IF;
      RETURN NEW;
    END $$;
    CREATE TRIGGER plants_refuse BEFORE INSERT ON plants FOR EACH ROW EXECUTE FUNCTION refuse_plant();
  `)

  const checked = await post(5001, NAME)
  t.equal(checked.status, 500, 'a check constraint violation: 500')
  const triggered = await post(5002, `${NAME} by trigger`)
  t.equal(triggered.status, 500, 'an exception raised by a trigger: 500')
  t.equal((await post(5003, 'an allowed plant')).status, 200, 'other plants are stored')

  const parsed = lines.map((l) => JSON.parse(l) as { err?: Record<string, unknown> })
  const dbErrors = parsed.filter((l) => l.err !== undefined && typeof l.err.code === 'string')
  t.ok(dbErrors.some((l) => l.err?.code === '23514' && l.err.constraint === 'plants_name_allowed' && l.err.table === 'plants'),
    'the check violation is logged with its SQLSTATE, constraint and table')
  t.ok(dbErrors.some((l) => l.err?.code === 'P0001'), 'the trigger\'s exception is logged with its SQLSTATE')
  t.notOk(lines.some((l) => l.includes('Secret Fern')), 'no line holds the plant\'s name')
  t.notOk(lines.some((l) => l.includes(TAG)), 'no line holds the plant\'s tag')
  t.notOk(lines.some((l) => l.includes('Failing row')), 'no line holds the failing row')
})
