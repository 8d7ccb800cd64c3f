-- wrk script for npm run bench (bench/load.ts): every request creates a
-- plant with an id never sent before, from the first id given, and the
-- script keeps the ids sent but not yet answered. Once wrk's time is up it
-- drops its connections with those requests in flight; the bench sends them
-- again itself, so that every id sent has exactly one counted answer and the
-- rows stored can be checked against the 200s.
-- Arguments (after --): first id, bearer token, and "random" for random
-- int64 ids (the store run, bench/store.ts): a random prefix, 1 to 9223371,
-- then the sequence number in 12 digits, so ids stay unique and below 2^63
-- while landing anywhere in the primary key's index. Ids are kept as text:
-- Lua's numbers are doubles, exact only to 2^53.

local threads = {}

function setup (thread)
  table.insert(threads, thread)
end

function init (args)
  next_id = tonumber(args[1])
  random_ids = args[3] == 'random'
  math.randomseed(next_id + os.time())
  headers = { ['Content-Type'] = 'application/json', ['Authorization'] = 'Bearer ' .. args[2] }
  pending = {}
  statuses = {}
end

function request ()
  local id = random_ids and string.format('%d%012d', math.random(1, 9223371), next_id) or string.format('%d', next_id)
  next_id = next_id + 1
  pending[id] = true
  return wrk.format('POST', '/plants', headers, '{"id":' .. id .. ',"name":"Plant ' .. id .. '","tag":"bench"}')
end

-- Both the service and the bare create answer a create with its name.
function response (status, _, body)
  statuses[status] = (statuses[status] or 0) + 1
  local id = string.match(body, '"Plant (%d+)"')
  if id ~= nil then pending[id] = nil end
end

local function json_object (t)
  local parts = {}
  for k, v in pairs(t) do table.insert(parts, '"' .. k .. '":' .. v) end
  return '{' .. table.concat(parts, ',') .. '}'
end

-- One line of JSON for bench/load.ts: answers by status, ids still in flight,
-- the next unused id, wrk's socket errors and its latency percentiles (µs).
function done (summary, latency)
  local counts, unanswered, next_free = {}, {}, 0
  for _, thread in ipairs(threads) do
    for status, n in pairs(thread:get('statuses')) do counts[status] = (counts[status] or 0) + n end
    for id in pairs(thread:get('pending')) do table.insert(unanswered, '"' .. id .. '"') end
    next_free = math.max(next_free, thread:get('next_id'))
  end
  local e = summary.errors
  io.write('BENCH-RESULT {"statuses":' .. json_object(counts) ..
    ',"pending":[' .. table.concat(unanswered, ',') .. ']' ..
    ',"nextId":' .. next_free ..
    ',"microseconds":' .. summary.duration ..
    ',"errors":{"connect":' .. e.connect .. ',"read":' .. e.read .. ',"write":' .. e.write .. ',"timeout":' .. e.timeout .. '}' ..
    ',"p50":' .. latency:percentile(50) .. ',"p99":' .. latency:percentile(99) .. '}\n')
end
