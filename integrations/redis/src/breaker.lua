-- fusebox: one circuit breaker in one Redis hash. Admission and outcome recording, atomically.
--
-- KEYS[1]  the breaker's hash, `{prefix:key}`
-- ARGV[1]  op: `admit`, `report`, `count`, `fold`, `cancel`, `force`, `state`, or `read` (`state` that
--          never creates the key)
-- ARGV[2]  time in milliseconds supplied by a test clock, or '' to read Redis `TIME`
-- ARGV[3]  idle TTL (ms)      ARGV[4]  count window (calls), or 2^40 + the slice (ms) of a time
--          window of ten slices   ARGV[5]  min_calls
-- ARGV[6]  failure rate (%, 0 = off)   ARGV[7]  slow rate (%, 0 = off)   ARGV[8]  consecutive (0 = off)
-- ARGV[9]  open_for (ms)       ARGV[10] open_backoff (factor x 1000)     ARGV[11] open_max (ms)
-- ARGV[12] half-open probes, or 2^40 + phases * 2^20 + min_passes for progressive recovery
-- ARGV[13] probe lease (ms)   ARGV[14] failure count (failures in the window that open it, 0 = off)
--          + 2^32 * quorum (0 = off; n: replicas; 2^16 + p: p % of the replicas active in the window)
-- report:  ARGV[15] generation modulo 1024 (1024: admitted while the replica knew no generation;
--          counted if the circuit is closed or disabled)  ARGV[16] the outcomes, one digit each in the order the
--          replica settled them (0 ignored, 1 success, 2 failure, 3 slow success, 4 slow failure,
--          5 the replica opened its own view alone: a key with a quorum counts it, see below):
--          a replica sums what it settled meanwhile into one report per key and generation, so
--          the script's load grows with the round trips, not with the calls; the outcomes after
--          a transition are stale (changes nothing)
--          ARGV[17] the replica's id, ARGV[18] the report's sequence number in that replica: a
--          report whose number is not above the last one recorded from that replica (field
--          `q<id>`) is a copy sent again and changes nothing
-- fold:    ARGV[15] generation (as for `report`), ARGV[16] the outcomes of that generation a
--          replica summed (aggregated mode): `calls failures slow slow_failures lead trail peak`
--          (lead: failures before the first success, trail: after the last, peak: the longest
--          run of failures); a count window takes at most its length of them, spread evenly;
--          the rules are judged once, on the whole fold. ARGV[17], ARGV[18] as for `report`
-- count:   ARGV[15] generation (as for `report`), ARGV[16] a number of successes a replica summed
--          (cached and aggregated modes): recorded as that many `1` digits of a report would
--          be, in O(1) script steps (O(w) slots for a count window); ARGV[17], ARGV[18] as for
--          `report`
-- force:   ARGV[15] target state, ARGV[16] the replica's id
-- admit:   ARGV[15] the replica's local state, ARGV[16] its open remaining (ms): used only when
--          the key does not exist (first share of a breaker already in use, or Redis restarted
--          and lost the state), so an open circuit stays open; ARGV[17] the replica's id and
--          ARGV[18] the admission's number in that replica: a half-open probe granted is kept as
--          the token `id.number` (field `pt`, with the generation), so `cancel` can give it back
-- cancel:  ARGV[15] the replica's id, ARGV[16] an admission's number: the replica never heard
--          the answer of that `admit` (its call timed out); if the admission holds a probe of
--          the current half-open, the probe is given back (code 1), else nothing changes (code 0)
--
-- Returns {code, state, generation, open remaining (ms), committed-from (-1: no transition),
--          calls, failures, reset, rule, slow, incarnation, field, window calls, window failures}
-- reset: 0 none; 1 a field held data this script did not write, and the key was reset; 2 a window
--        slot (`t*` or `r*`) or the probe tokens (`pt`) did, and it was cleared. field: which (see `corrupt_field` in script.rs):
--        the index in FIELDS, NOT_HASH (the key is not a hash), REPLICA_SEQUENCE (the caller's
--        `q<id>`, cleared: it is overwritten), PROBE_TOKENS (`pt`), 100 + i for `ti`, 1000 + i
--        for `ri`
-- incarnation: written when the key is created (Redis `TIME` in microseconds), so a replica can tell
--        a key that was deleted and created again (its generations restart) from a stale answer;
--        0 from `read` on a missing key
-- window calls, window failures: the current window after this call (-1 when not read)
-- rule: what committed the transition (0 with no transition): 1 failure_rate, 2 slow_rate,
--       3 consecutive, 4 failure_count, 5 open_wait_over, 6 lease_expired, 7 probe_failed,
--       8 probes_passed, 9 phase_passed, 10 operator (`force`), 11 quorum (replicas opened alone)
-- calls, failures, slow: the window (or the probes) that decided the transition
-- `state` and `read` answer 9 more: the last transition's from (-1: none), to, rule, calls,
--       failures, slow, age (ms), the id of the replica that committed it (ARGV[17] of the call,
--       ARGV[16] of `force`), and the generation it started; every transition writes them to
--       field `lt`
-- window calls, window failures: the current window after this call, what operators see (-1 when
--       this call did not read a closed time window's buckets: an admission or a stale report)
-- admit codes: 0 rejected (open), 1 admitted, 2 admitted as a probe, 3 rejected (probes taken),
--              4 rejected (forced open), 5 rejected (recovering: not this phase's share).   report codes: 0 stale (changes nothing), 1 applied.
-- States: 0 closed, 1 open, 2 half-open, 3 forced open, 4 disabled.
--
-- The count window is a ring of `w` slots `r0..r{w-1}` with running totals, so every call is O(1)
-- in the window size. A slot holds `generation * 8 + code`; slots of an older generation count as
-- empty, so a transition clears the window without touching it. A time window is ten buckets
-- `t0..t9`, each `generation:slice:calls:failures:slow`; totals sum the buckets of the current
-- generation whose slice is among the last ten (ten reads: O(1) in the window's size).
--
-- Every field read is checked (decimal digits within its bound, `n >= f`, `cur < w`, ...): a key
-- holding anything else is reset, and a window slot holding anything else is cleared, so no data
-- under the key can wedge the circuit. `force` rewrites the whole key.
local k = KEYS[1]
local op = ARGV[1]
local now
if ARGV[2] ~= '' then
  now = tonumber(ARGV[2])
else
  local t = redis.call('TIME')
  now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
end
local ttl = tonumber(ARGV[3])
local w = tonumber(ARGV[4])
local TIME = 1099511627776
local slice_ms = 0
if w >= TIME then slice_ms = w - TIME end
local min_calls = tonumber(ARGV[5])
local rate = tonumber(ARGV[6])
local slow_rate = tonumber(ARGV[7])
local consecutive = tonumber(ARGV[8])
local open_for = tonumber(ARGV[9])
local backoff = tonumber(ARGV[10])
local open_max = tonumber(ARGV[11])
local probes = tonumber(ARGV[12])
-- Progressive recovery: phase k of `phases` admits k calls in every `phases` (`sq` counts the
-- phase's admissions asked for, `ph` is the phase, `pas`/`pf` its calls and failures).
local phases, min_passes = 0, 0
if probes >= TIME then
  local rest = probes - TIME
  phases = math.floor(rest / 1048576)
  min_passes = rest % 1048576
  probes = 1
end
local lease = tonumber(ARGV[13])
local failure_count = tonumber(ARGV[14]) % 4294967296
-- Quorum: a closed circuit's rules open it only when the failures come from at least this many
-- replicas; and it opens (rule 11) once that many replicas opened their own view alone (digit 5
-- of a report). Each replica's last outcome, last failure and last opening alone in the current
-- generation are kept in field `a<id>` (`generation:mark:failure mark:alone mark`, 0: none;
-- field `ql` lists the ids that have one),
-- where a mark is a time window's slice or a count window's position (field `qp`,
-- `generation:position`, the outcomes counted so far); a mark is in the window when it is among
-- its last ten slices or `w` positions. Fields that do not parse count as none and are
-- overwritten.
local quorum = math.floor(tonumber(ARGV[14]) / 4294967296)

local FIELDS = {'v', 'st', 'g', 'dl', 'iss', 'pas', 'arm', 'n', 'f', 's', 'cur', 'run', 'ro', 'w', 'ph', 'sq', 'pf', 'inc'}
local NOT_HASH = #FIELDS + 1
-- The calling replica's report sequence field `q<id>` (ARGV[17]).
local REPLICA_SEQUENCE = #FIELDS + 2
-- The half-open probes granted by `admit` (`generation:id.number,id.number,...`).
local PROBE_TOKENS = #FIELDS + 3
-- The most probe tokens kept (the newest): a token can only be given back right after its
-- `admit` (the replica sends `cancel` when that call times out, on the same connection).
local MAX_TOKENS = 64
-- Generations stay below 10^13: exact as doubles (also times 8, in a count window's slot) and
-- printed in full. Incarnations stay below 2^53.
local MAXG = 10000000000000
local MAXI = 9007199254740991
-- The longest open wait this caller's policy gives.
local cap = math.max(open_max, open_for)

-- A field as this script writes it: decimal digits, at most `hi`; nil for anything else (`nan`,
-- `inf`, `-1`, `1.5`, `1e300`, a word, a missing field).
local function int(raw, hi)
  if type(raw) ~= 'string' or #raw > 16 or not string.find(raw, '^%d+$') then return nil end
  local x = tonumber(raw)
  if x > hi then return nil end
  return x
end

-- The fields of an existing key (`h`, as HMGET answered), checked; nil and the index of the first
-- field that does not hold what this script writes there.
local function read_fields(h)
  local b = {}
  local function take(i, hi)
    b[FIELDS[i]] = int(h[i], hi)
    return b[FIELDS[i]] ~= nil
  end
  if h[1] ~= 'fb1' then return nil, 1 end
  -- The window first: the counts' bounds depend on it.
  if not take(14, TIME + 4294967296) or b.w == 0 or (b.w > 4294967296 and b.w <= TIME) then return nil, 14 end
  local count = b.w < TIME
  if not take(2, 4) then return nil, 2 end
  if not take(3, MAXG - 1) then return nil, 3 end
  if not take(4, now + math.max(cap, ttl)) then return nil, 4 end
  if not take(5, 1024) then return nil, 5 end
  if not take(6, 1048576) then return nil, 6 end
  if not take(7, now + lease) then return nil, 7 end
  if not take(8, count and b.w or MAXG) then return nil, 8 end
  if not take(9, b.n) then return nil, 9 end
  if not take(10, b.n) then return nil, 10 end
  if not take(11, count and b.w - 1 or MAXG) then return nil, 11 end
  if not take(12, MAXG) then return nil, 12 end
  if not take(13, MAXG) then return nil, 13 end
  if not take(15, 1024) then return nil, 15 end
  if not take(16, MAXG) then return nil, 16 end
  if not take(17, b.pas) then return nil, 17 end
  -- A key written before incarnations has none: it gets one below.
  if h[18] then
    if not take(18, MAXI) or b.inc == 0 then return nil, 18 end
  else
    b.inc = 0
  end
  return b, 0
end

-- A new incarnation, different from `old`.
local function incarnation(old)
  local t = redis.call('TIME')
  local inc = tonumber(t[1]) * 1000000 + tonumber(t[2])
  if inc == old then inc = inc + 1 end
  return inc
end

-- reset, field: see the header.
local reset, bad = 0, 0
local b
local old_inc = 0
local h = redis.pcall('HMGET', k, unpack(FIELDS))
if type(h) ~= 'table' or h.err then
  bad = NOT_HASH
else
  old_inc = int(h[18], MAXI) or 0
  for i = 1, #FIELDS do
    if h[i] then
      b, bad = read_fields(h)
      break
    end
  end
end
if bad > 0 then
  -- Not ours, or not readable: reset the key (the caller reports it).
  redis.call('DEL', k)
  reset = 1
  b = nil
end
local fresh = not b
if fresh then
  if op == 'read' then return {1, 0, 0, 0, -1, 0, 0, reset, 0, 0, 0, bad, 0, 0, -1, 0, 0, 0, 0, 0, 0, 0, 0} end
  -- No key, no probe to give back (and nothing is created).
  if op == 'cancel' then return {0, 0, 0, 0, -1, 0, 0, reset, 0, 0, 0, bad, -1, -1} end
  -- A new key: generations start at the current second, so they do not go backwards across a
  -- restart that lost the state, and a result admitted before the loss stays stale.
  b = {st = 0, g = math.floor(now / 1000), dl = 0, iss = 0, pas = 0, arm = 0, n = 0, f = 0, s = 0, cur = 0, run = 0, ro = 0, w = w, ph = 0, sq = 0, pf = 0, inc = incarnation(old_inc)}
  local seed = op == 'admit' and tonumber(ARGV[15]) or 0
  if seed == 1 or seed == 3 or seed == 4 then
    b.st = seed
    if seed == 1 then b.dl = now + math.min(tonumber(ARGV[16]) or open_for, cap) end
  end
end
-- A key written before incarnations gets one.
local adopted = false
if b.inc == 0 and op ~= 'read' then
  b.inc = incarnation(0)
  adopted = true
end
-- An open wait longer than this caller's policy gives (another replica's policy wrote it) ends
-- when this policy's would.
if b.st == 1 and b.dl > now + cap then b.dl = now + cap end
-- Progressive recovery half-open with no phase (a replica with `half_open` probes moved it there)
-- starts at phase 1, so it admits.
if phases > 0 and b.st == 2 and b.ph == 0 then b.ph = 1 end

-- Marks a window slot that held data this script did not write (it counts as empty).
local function corrupt(code)
  if reset == 0 then reset, bad = 2, code end
end

-- A time window's bucket `field` (`generation:slice:calls:failures:slow`); nothing when it is
-- missing, or does not parse (it is then deleted and reported).
local function bucket(field)
  local raw = redis.call('HGET', k, field)
  if not raw then return nil end
  local g, sl, c, fl, sw = string.match(raw, '^(%d+):(%d+):(%d+):(%d+):(%d+)$')
  g, sl, c, fl, sw = tonumber(g), tonumber(sl), tonumber(c), tonumber(fl), tonumber(sw)
  if not sw or g >= MAXG or sl >= MAXG or c >= MAXG or fl > c or sw > c then
    redis.call('HDEL', k, field)
    corrupt(100 + tonumber(string.sub(field, 2)))
    return nil
  end
  return g, sl, c, fl, sw
end

-- A count window's slot `field` holding `raw` (`generation * 8 + code`, code 1..4), 0 when it
-- is empty, or does not parse (reported; it is about to be overwritten).
local function slot_of(field, raw)
  if not raw then return 0 end
  local x = int(raw, MAXG * 8)
  if x and (math.floor(x / 8) ~= b.g or (x % 8 >= 1 and x % 8 <= 4)) then return x end
  corrupt(1000 + tonumber(string.sub(field, 2)))
  return 0
end

local function slot(field)
  return slot_of(field, redis.call('HGET', k, field))
end

-- Takes slot value `x` (as `slot` reads it) out of the window's totals when it is of the
-- current generation: it is about to be overwritten.
local function forget(x)
  if x > 0 and math.floor(x / 8) == b.g then
    local old_code = x % 8 - 1
    b.n = b.n - 1
    b.f = b.f - old_code % 2
    b.s = b.s - math.floor(old_code / 2)
  end
end

-- The generation the caller may hold: a change is published to cached replicas.
local g0 = b.g
if op ~= 'read' and (b.w ~= w or (slice_ms == 0 and b.cur >= w)) then
  -- The window length changed: start an empty window.
  b.g = b.g + 1
  b.n, b.f, b.s, b.cur, b.w = 0, 0, 0, 0, w
end
local dirty = fresh or adopted or b.g ~= g0
-- Set when only the window moved: the write is limited to the window's fields.
local counted = false
local from = -1
-- The rule that committed the transition (see the header).
local rule = 0

local function open_wait(reopens)
  if reopens == 0 or backoff <= 1000 then return open_for end
  local cap = math.max(open_max, open_for)
  local wait = open_for * (backoff / 1000) ^ math.min(reopens, 4096)
  if wait >= cap then return cap end
  return math.floor(wait)
end

local function move(state)
  from = b.st
  b.st = state
  b.g = b.g + 1
  b.iss, b.pas, b.arm = 0, 0, 0
  b.n, b.f, b.s, b.run = 0, 0, 0, 0
  b.ph, b.sq, b.pf = 0, 0, 0
  dirty = true
end

local function open(reopens)
  b.ro = reopens
  local calls, failures, slow_calls = b.n, b.f, b.s
  move(1)
  b.dl = now + open_wait(reopens)
  return calls, failures, slow_calls
end

-- The rule a closed circuit trips by after an outcome (`failure`: 1 when it failed) or a fold
-- (`failure`: 1 when it held a failure), with `run` failures in a row, 0 for none; checked in the
-- order the in-memory breaker checks them.
local function rule_reached(failure, run)
  if consecutive > 0 and run >= consecutive then return 3 end
  -- `failure_count`: the window's failures, whatever the rate and `min_calls`.
  if failure == 1 and failure_count > 0 and b.f >= failure_count then return 4 end
  if b.n >= min_calls then
    if rate > 0 and b.f * 100 >= rate * b.n then return 1 end
    if slow_rate > 0 and b.s * 100 >= slow_rate * b.n then return 2 end
  end
  return 0
end

-- Quorum bookkeeping of this call: the count window's position, outcomes counted so far, and
-- whether the calling replica (ARGV[17]) reported a failure in them.
local qpos, added, me_failed, me_alone = nil, 0, false, false
-- What `quorum_met` found, by whether the calling replica had failed then: a report's outcomes
-- come from one replica, so the others are read once per call.
local quorum_seen = {}

-- The current mark: a time window's slice, or a count window's position.
local function mark_now()
  if slice_ms > 0 then return math.floor(now / slice_ms) + 1 end
  if not qpos then
    local g, pos = string.match(tostring(redis.call('HGET', k, 'qp')), '^(%d+):(%d+)$')
    qpos = (tonumber(g) == b.g and tonumber(pos)) or 0
  end
  return qpos + added
end

local function in_window(mark, cur)
  if not mark or mark == 0 or mark > cur then return false end
  if slice_ms > 0 then return mark > cur - 10 end
  return mark > cur - w
end

-- The ids of the replicas with an entry (field `ql`, comma-separated), each once, and as a set.
local function replica_ids()
  local ids, seen = {}, {}
  for id in string.gmatch(tostring(redis.call('HGET', k, 'ql')), '%d+') do
    if not seen[id] and #id <= 20 then
      seen[id] = true
      ids[#ids + 1] = id
    end
  end
  return ids, seen
end

-- The replicas that failed, that opened alone, and that recorded an outcome in the window,
-- the calling replica (ARGV[17]) counted with what this call carries: the entries `ql` names,
-- read in chunks Lua's stack takes (O(replicas), whatever the window's size). An entry of an
-- older generation, out of the window or unreadable is a replica gone quiet: removed with its id.
local function replicas_in_window()
  local cur, me = mark_now(), tostring(ARGV[17])
  local failing, alone, active = 0, 0, 1
  if me_failed then failing = 1 end
  if me_alone then alone = 1 end
  local ids = replica_ids()
  local kept, gone = {}, {}
  for i = 1, #ids, 4000 do
    local fields = {}
    for j = i, math.min(i + 3999, #ids) do fields[#fields + 1] = 'a' .. ids[j] end
    local values = redis.call('HMGET', k, unpack(fields))
    for j = 1, #fields do
      local id = ids[i + j - 1]
      local g, m, fm, am = string.match(tostring(values[j]), '^(%d+):(%d+):(%d+):(%d+)$')
      if tonumber(g) ~= b.g or not in_window(tonumber(m), cur) then
        gone[#gone + 1] = fields[j]
      else
        kept[#kept + 1] = id
        local failed, opened = in_window(tonumber(fm), cur), in_window(tonumber(am), cur)
        if id == me then
          if failed and not me_failed then failing = failing + 1 end
          if opened and not me_alone then alone = alone + 1 end
        else
          active = active + 1
          if failed then failing = failing + 1 end
          if opened then alone = alone + 1 end
        end
      end
    end
  end
  if #gone > 0 then
    for i = 1, #gone, 4000 do redis.call('HDEL', k, unpack(gone, i, math.min(i + 3999, #gone))) end
    redis.call('HSET', k, 'ql', table.concat(kept, ','))
  end
  return failing, alone, active
end

-- The replicas the quorum asks for when `active` replicas recorded an outcome in the window.
local function quorum_of(active)
  if quorum >= 65536 then return math.max(1, math.ceil(active * (quorum - 65536) / 100)) end
  return quorum
end

-- True when the failures in the window come from at least the quorum of replicas (always
-- without a quorum).
local function quorum_met()
  if quorum == 0 then return true end
  if quorum_seen[me_failed] == nil then
    local failing, _, active = replicas_in_window()
    quorum_seen[me_failed] = failing >= quorum_of(active)
  end
  return quorum_seen[me_failed]
end

-- After a call that counted outcomes of a closed circuit, or told that its replica opened alone:
-- the calling replica's entry, and the count window's position.
local function keep_quorum_marks()
  if quorum == 0 or (added == 0 and not me_alone) or not ARGV[17] or not string.find(ARGV[17], '^%d+$') then return end
  local cur = mark_now()
  local field = 'a' .. ARGV[17]
  local g, _, fm, am = string.match(tostring(redis.call('HGET', k, field)), '^(%d+):(%d+):(%d+):(%d+)$')
  if tonumber(g) ~= b.g then
    fm, am = 0, 0
    -- A new entry: its id joins `ql`.
    local ids, seen = replica_ids()
    if not seen[ARGV[17]] then
      ids[#ids + 1] = ARGV[17]
      redis.call('HSET', k, 'ql', table.concat(ids, ','))
    end
  end
  if me_failed then fm = cur end
  if me_alone then am = cur end
  redis.call('HSET', k, field, b.g .. ':' .. cur .. ':' .. fm .. ':' .. am)
  if slice_ms == 0 and added > 0 then redis.call('HSET', k, 'qp', b.g .. ':' .. cur) end
end

-- `rule_reached`, held back while fewer replicas than the quorum failed.
local function trip_rule(failure, run)
  local rule = rule_reached(failure, run)
  if rule > 0 and not quorum_met() then return 0 end
  return rule
end

-- The time window's totals at `now` (calls, failures, slow), and the current slice.
local function time_totals()
  local slice = math.floor(now / slice_ms) + 1
  local n, f, s = 0, 0, 0
  for i = 0, 9 do
    local g, sl, c, fl, sw = bucket('t' .. i)
    if g == b.g and sl <= slice and sl > slice - 10 then
      n, f, s = n + c, f + fl, s + sw
    end
  end
  return n, f, s, slice
end

-- The probe tokens of the current generation (older ones count as none). A field that does not
-- parse is cleared and reported.
local function probe_tokens()
  local raw = redis.call('HGET', k, 'pt')
  local list = {}
  if not raw then return list end
  local g, rest = string.match(raw, '^(%d+):([%d.,]*)$')
  if not g or #raw > 64 * MAX_TOKENS then
    redis.call('HDEL', k, 'pt')
    corrupt(PROBE_TOKENS)
    return list
  end
  if tonumber(g) ~= b.g then return list end
  for token in string.gmatch(rest, '[^,]+') do list[#list + 1] = token end
  return list
end

local function write_tokens(list)
  redis.call('HSET', k, 'pt', b.g .. ':' .. table.concat(list, ','))
end

-- Keeps the token of a half-open probe this `admit` grants (counted probes only: progressive
-- recovery holds no slot).
local function grant()
  local id, number = ARGV[17], ARGV[18]
  if phases > 0 or not id or not string.find(id, '^%d+$') or not number or not string.find(number, '^%d+$') then return end
  local list = probe_tokens()
  list[#list + 1] = id .. '.' .. number
  while #list > MAX_TOKENS do table.remove(list, 1) end
  write_tokens(list)
end

-- At most once: each replica numbers its reports and folds (ARGV[17] the replica, ARGV[18] the
-- number); one already recorded (its answer was lost, and the replica sent it again) changes
-- nothing. True for such a copy.
local function recorded_before()
  local seq = tonumber(ARGV[18])
  if not (ARGV[17] and seq) then return false end
  local field = 'q' .. ARGV[17]
  local raw = redis.call('HGET', k, field)
  local last = int(raw, MAXI)
  if raw and not last then corrupt(REPLICA_SEQUENCE) end
  if seq <= (last or 0) then return true end
  redis.call('HSET', k, field, seq)
  return false
end

-- True when a fold or count of generation `gen` (modulo 1024; 1024: admitted under none, taken
-- while the circuit is closed or disabled) is taken: not a copy sent again, and of the
-- circuit's generation.
local function takes(gen)
  local duplicate = recorded_before()
  return not duplicate and (gen == 1024 and (b.st == 0 or b.st == 4) or gen == b.g % 1024)
end

-- The time window's current bucket, as `{field, slice, c, fl, sw}` (empty when it holds another
-- slice or generation), after the window's totals are read into `b`.
local function current_bucket()
  local slice = math.floor(now / slice_ms) + 1
  local tb = {field = 't' .. (slice % 10), slice = slice, c = 0, fl = 0, sw = 0}
  local g, sl, oc, ofl, osw = bucket(tb.field)
  if g == b.g and sl == slice then tb.c, tb.fl, tb.sw = oc, ofl, osw end
  b.n, b.f, b.s = time_totals()
  return tb
end

-- A bucket as the hash holds it: `generation:slice:calls:failures:slow`.
local function bucket_text(tb)
  return string.format('%d:%d:%d:%d:%d', b.g, tb.slice, tb.c, tb.fl, tb.sw)
end

local function remaining()
  if b.st == 1 and b.dl > now then return b.dl - now end
  return 0
end

local code = 0
local calls, failures, slow_calls = 0, 0, 0

-- Progressive recovery: judges the phase once it holds `min_passes` calls (it fails at the
-- policy's failure rate, 50 % without one): reopen, close after the last phase, or the next one.
local function judge_phase()
  if b.pas < min_passes then return end
  local threshold = rate > 0 and rate or 50
  calls, failures = b.pas, b.pf
  if b.pf * 100 >= threshold * b.pas then
    open(b.ro + 1)
    rule = 7
  elseif b.ph >= phases then
    move(0)
    rule = 8
    b.ro = 0
  else
    local ph = b.ph
    move(2)
    rule = 9
    b.ph = ph + 1
  end
end

-- Half-open with probes: closes once `probes` of them passed.
local function close_when_passed()
  if b.pas < probes then return end
  calls = b.pas
  move(0)
  rule = 8
  b.ro = 0
end

-- Writes `m` slots of the count window from `cur` on, slot i (from 1) holding code `code_of(i)`
-- (1 success, 2 failure, 3 slow success, 4 slow failure), taking what they held out of the
-- totals; read and written in chunks Lua's stack takes.
local function write_slots(m, code_of)
  local fields = {}
  for i = 0, m - 1 do fields[#fields + 1] = 'r' .. ((b.cur + i) % w) end
  local olds = {}
  for i = 1, m, 4000 do
    local part = redis.call('HMGET', k, unpack(fields, i, math.min(i + 3999, m)))
    for j = 1, #part do olds[i + j - 1] = part[j] end
  end
  local values = {}
  for i = 1, m do
    forget(slot_of(fields[i], olds[i]))
    values[#values + 1] = fields[i]
    values[#values + 1] = b.g * 8 + code_of(i)
  end
  for i = 1, #values, 4000 do
    redis.call('HSET', k, unpack(values, i, math.min(i + 3999, #values)))
  end
  b.cur = (b.cur + m) % w
end

-- Adds `m` successes to a closed (or disabled) circuit's window at once: a count window keeps
-- the last `w` of them.
local function add_successes(m)
  if slice_ms > 0 then
    local tb = current_bucket()
    tb.c = tb.c + m
    redis.call('HSET', k, tb.field, bucket_text(tb))
    b.n = b.n + m
  else
    local kept = math.min(m, w)
    b.cur = (b.cur + m - kept) % w
    write_slots(kept, function() return 1 end)
    b.n = b.n + kept
  end
  b.run = 0
  counted = true
end

if op == 'admit' then
  if b.st == 0 or b.st == 4 then
    code = 1
  elseif b.st == 3 then
    code = 4
  elseif b.st == 1 then
    if now < b.dl then
      code = 0
    else
      -- The window of the open state, as memory reports it (empty: opening started it).
      calls, failures, slow_calls = b.n, b.f, b.s
      move(2)
      rule = 5
      b.iss, b.arm = 1, now
      if phases > 0 then b.ph = 1 end
      code = 2
      grant()
    end
  elseif b.st == 2 and phases > 0 then
    local seq = b.sq
    b.sq = b.sq + 1
    dirty = true
    if seq % phases < b.ph then code = 2 else code = 5 end
  elseif b.st == 2 then
    if b.iss < probes then
      b.iss = b.iss + 1
      dirty = true
      code = 2
      grant()
    elseif now - b.arm >= lease then
      -- The probes never reported within their lease (their replica died): re-arm.
      local ro = b.ro
      calls, failures, slow_calls = b.n, b.f, b.s
      move(2)
      rule = 6
      b.ro = ro
      b.iss, b.arm = 1, now
      code = 2
      grant()
    else
      code = 3
    end
  end
elseif op == 'report' then
  local gen = tonumber(ARGV[15])
  local codes = ARGV[16]
  -- Checked whole before anything is written: one digit 0..4 per outcome, at most 1024.
  if type(codes) ~= 'string' or #codes > 1024 or not string.find(codes, '^[0-5]+$') then
    return redis.error_reply('fusebox: outcomes must be 1 to 1024 digits 0-5, not ' .. string.sub(tostring(codes), 1, 32))
  end
  local duplicate = recorded_before()
  -- The count window's slots and the time window's bucket this report reads and writes, read
  -- once and written once at the end, so a report of many outcomes costs one read and one
  -- write per slot it touches.
  local slots, writes = {}, {}
  local function get_slot(field)
    if slots[field] == nil then slots[field] = slot(field) end
    return slots[field]
  end
  local tb = nil
  for i = 1, #codes do
    -- A permit keeps its generation modulo 2^10 (1024: admitted while its replica knew no
    -- generation, counted if the circuit is closed); after a transition in this report, the
    -- rest of its outcomes are stale.
    if duplicate then break end
    if gen == 1024 then
      if b.st ~= 0 and b.st ~= 4 then break end
    elseif gen ~= b.g % 1024 then
      break
    end
    local digit = string.byte(codes, i) - 48
    local outcome, slow = digit, 0
    if digit >= 3 then outcome, slow = digit - 2, 1 end
    if digit == 5 then
      -- This replica opened alone: no outcome; with a quorum, a closed circuit counts it.
      if b.st == 0 and quorum > 0 then
        code = 1
        me_alone = true
        local _, alone, active = replicas_in_window()
        if alone >= quorum_of(active) then
          calls, failures, slow_calls = open(0)
          rule = 11
        end
      end
    elseif b.st == 0 or b.st == 4 then
      code = 1
      if outcome ~= 0 then
        local failure = outcome == 2 and 1 or 0
        if slice_ms > 0 then
          if not tb then tb = current_bucket() end
          tb.c, tb.fl, tb.sw = tb.c + 1, tb.fl + failure, tb.sw + slow
          writes[tb.field] = bucket_text(tb)
        else
          local field = 'r' .. b.cur
          forget(get_slot(field))
          slots[field] = b.g * 8 + 1 + failure + 2 * slow
          writes[field] = slots[field]
          b.cur = (b.cur + 1) % w
        end
        b.n, b.f, b.s = b.n + 1, b.f + failure, b.s + slow
        if failure == 1 then b.run = b.run + 1 else b.run = 0 end
        counted = true
        added = added + 1
        if failure == 1 then me_failed = true end
        if b.st == 0 then
          rule = trip_rule(failure, b.run)
          if rule > 0 then calls, failures, slow_calls = open(0) end
        end
      end
    elseif b.st == 2 and phases > 0 then
      code = 1
      if outcome ~= 0 then
        b.pas = b.pas + 1
        if outcome == 2 then b.pf = b.pf + 1 end
        dirty = true
        judge_phase()
      end
    elseif b.st == 2 then
      code = 1
      if outcome == 1 then
        b.pas = b.pas + 1
        dirty = true
        close_when_passed()
      elseif outcome == 2 then
        calls, failures = b.pas + 1, 1
        open(b.ro + 1)
        rule = 7
      else
        if b.iss > 0 then b.iss = b.iss - 1 end
        dirty = true
      end
    else
      break
    end
  end
  local list = {}
  for field, value in pairs(writes) do
    list[#list + 1] = field
    list[#list + 1] = value
  end
  if #list > 0 then redis.call('HSET', k, unpack(list)) end
elseif op == 'fold' then
  -- A replica's outcomes of one generation summed: calls, failures, slow calls, slow failures,
  -- the failures before its first success, after its last, and its longest run of failures.
  local gen = tonumber(ARGV[15])
  local d = {string.match(tostring(ARGV[16]), '^(%d+) (%d+) (%d+) (%d+) (%d+) (%d+) (%d+)$')}
  for i = 1, 7 do d[i] = tonumber(d[i]) end
  local n, f, s, sf, lead, trail, peak = d[1], d[2], d[3], d[4], d[5], d[6], d[7]
  -- Checked whole before anything is written.
  if not peak or n < 1 or n > 4294967295 or f > n or s > n or sf > f or sf > s or lead > f
    or trail > f or peak > f or peak < lead or peak < trail or (f == n and (lead ~= n or trail ~= n)) then
    return redis.error_reply('fusebox: a fold is `calls failures slow slow_failures lead trail peak`, consistent, not ' .. string.sub(tostring(ARGV[16]), 1, 64))
  end
  if takes(gen) and (b.st == 0 or b.st == 4) then
    code = 1
    if slice_ms > 0 then
      local tb = current_bucket()
      tb.c, tb.fl, tb.sw = tb.c + n, tb.fl + f, tb.sw + s
      redis.call('HSET', k, tb.field, bucket_text(tb))
      b.n, b.f, b.s = b.n + n, b.f + f, b.s + s
    else
      -- The window keeps the last `w` calls: a fold longer than the window writes every slot,
      -- with its counts scaled; failures (and slow calls) are spread evenly over its slots.
      local m = math.min(n, w)
      local mf, ms, msf = f, s, sf
      if m < n then
        mf = math.floor(f * m / n + 0.5)
        ms = math.floor(s * m / n + 0.5)
        msf = math.min(math.floor(sf * m / n + 0.5), mf, ms)
        ms = math.min(ms, msf + m - mf)
      end
      local df, ds, dsf = 0, 0, 0
      write_slots(m, function(i)
        -- Slot i carries a failure when the even spread of `mf` over `m` passes a whole one.
        local failure = math.floor(i * mf / m) - df
        df = df + failure
        local slow = 0
        if failure == 1 then
          slow = math.floor(df * msf / math.max(mf, 1)) - dsf
          dsf = dsf + slow
        else
          local fast = i - df
          slow = math.floor(fast * (ms - msf) / math.max(m - mf, 1)) - (ds - dsf)
        end
        ds = ds + slow
        return 1 + failure + 2 * slow
      end)
      b.n, b.f, b.s = b.n + m, b.f + mf, b.s + ms
    end
    local run_peak
    if f == n then
      b.run = b.run + n
      run_peak = b.run
    else
      run_peak = math.max(b.run + lead, peak)
      b.run = trail
    end
    counted = true
    added = n
    if f > 0 then me_failed = true end
    if b.st == 0 then
      rule = trip_rule(f > 0 and 1 or 0, run_peak)
      if rule > 0 then calls, failures, slow_calls = open(0) end
    end
  end
elseif op == 'count' then
  -- `n` successes of one generation a replica summed (cached and aggregated modes), recorded as
  -- `n` digits `1` of a report would be: a success only lowers a closed window's rates, so the
  -- rules are judged once, at the first success that brings the window to `min_calls` (or at
  -- the first, when it is there already), and the rest are added at once; a half-open circuit
  -- takes them as probes' successes up to its transition. The rest after a transition is stale.
  local gen = tonumber(ARGV[15])
  local n = int(ARGV[16], 4294967295)
  if not n or n < 1 then
    return redis.error_reply('fusebox: a count is 1 to 4294967295 successes, not ' .. string.sub(tostring(ARGV[16]), 1, 32))
  end
  local taken = takes(gen)
  if taken and (b.st == 0 or b.st == 4) then
    code = 1
    local first = n
    if b.st == 0 then
      if slice_ms > 0 then b.n, b.f, b.s = time_totals() end
      local reach = min_calls - b.n
      if slice_ms == 0 and min_calls > w then reach = n end
      first = math.min(n, math.max(1, reach))
    end
    add_successes(first)
    added = first
    if b.st == 0 then
      rule = trip_rule(0, 0)
      if rule > 0 then calls, failures, slow_calls = open(0) end
    end
    if rule == 0 and n > first then
      add_successes(n - first)
      added = n
    end
  elseif taken and b.st == 2 and phases > 0 then
    code = 1
    b.pas = b.pas + math.min(n, math.max(1, min_passes - b.pas))
    dirty = true
    judge_phase()
  elseif taken and b.st == 2 then
    code = 1
    b.pas = math.min(b.pas + n, probes)
    dirty = true
    close_when_passed()
  end
elseif op == 'cancel' then
  if b.st == 2 and phases == 0 then
    local token = tostring(ARGV[15]) .. '.' .. tostring(ARGV[16])
    local list = probe_tokens()
    for i = 1, #list do
      if list[i] == token then
        table.remove(list, i)
        write_tokens(list)
        if b.iss > 0 then b.iss = b.iss - 1 end
        dirty = true
        code = 1
        break
      end
    end
  end
elseif op == 'force' then
  local target = tonumber(ARGV[15])
  if target ~= 0 and target ~= 3 and target ~= 4 then
    return redis.error_reply('fusebox: cannot force state ' .. tostring(ARGV[15]))
  end
  calls, failures, slow_calls = b.n, b.f, b.s
  -- The key is written anew, whatever it held (window slots included); its generation and
  -- incarnation go on, so replicas take the forced state as the next one.
  if not fresh then redis.call('UNLINK', k) end
  b = {st = b.st, g = b.g, dl = 0, iss = 0, pas = 0, arm = 0, n = 0, f = 0, s = 0, cur = 0, run = 0, ro = 0, w = w, ph = 0, sq = 0, pf = 0, inc = b.inc}
  if target ~= b.st then move(target); rule = 10 else b.g = b.g + 1 end
  dirty = true
  code = 1
elseif op == 'state' or op == 'read' then
  code = 1
  if slice_ms > 0 and (b.st == 0 or b.st == 4) then b.n, b.f = time_totals() end
  calls, failures = b.n, b.f
else
  return redis.error_reply('fusebox: unknown op ' .. tostring(op))
end

if (counted or me_alone) and from < 0 then keep_quorum_marks() end
if counted then
  -- A slot that held data this script did not write may have been counted: the totals stay
  -- within the window.
  b.n = math.min(b.n, slice_ms == 0 and w or MAXG - 1)
  b.f, b.s = math.max(0, math.min(b.f, b.n)), math.max(0, math.min(b.s, b.n))
end
if dirty then
  redis.call('HSET', k, 'v', 'fb1', 'st', b.st, 'g', b.g, 'dl', b.dl, 'iss', b.iss, 'pas', b.pas,
    'arm', b.arm, 'n', b.n, 'f', b.f, 's', b.s, 'cur', b.cur, 'run', b.run, 'ro', b.ro, 'w', b.w,
    'ph', b.ph, 'sq', b.sq, 'pf', b.pf, 'inc', b.inc)
elseif counted then
  redis.call('HSET', k, 'n', b.n, 'f', b.f, 's', b.s, 'cur', b.cur, 'run', b.run)
end
-- The idle TTL restarts on every write (an admission on a closed circuit writes nothing).
if dirty or counted then
  redis.call('PEXPIRE', k, ttl)
end
-- Cached replicas learn every new generation (a transition, a forced state, a new window) from
-- this message: `state generation open-remaining-ms incarnation key`.
if b.g ~= g0 then
  redis.call('PUBLISH', 'fusebox:transitions', string.format('%d %d %d %d %s', b.st, b.g, remaining(), b.inc, k))
end
-- The last transition's provenance (field `lt`), kept with the shared state so every replica can
-- say why the circuit moved: `from to rule calls failures slow at replica generation`.
if from >= 0 then
  local who = op == 'force' and ARGV[16] or ARGV[17]
  if type(who) ~= 'string' or #who > 16 or not string.find(who, '^%d+$') then who = '0' end
  redis.call('HSET', k, 'lt', string.format('%d %d %d %d %d %d %d %s %d', from, b.st, rule, calls, failures, slow_calls, now, who, b.g))
end
local wn, wf = b.n, b.f
if slice_ms > 0 and (b.st == 0 or b.st == 4) and (op == 'admit' or op == 'cancel' or ((op == 'report' or op == 'fold' or op == 'count') and not counted)) then
  wn, wf = -1, -1
end
local answer = {code, b.st, b.g, remaining(), from, calls, failures, reset, rule, slow_calls, b.inc, bad, wn, wf}
if op == 'state' or op == 'read' then
  -- The last transition's provenance (from -1: none kept, or a field this script did not write,
  -- which is ignored): from, to, rule, calls, failures, slow, age (ms), replica, generation.
  local lt = {string.match(tostring(redis.call('HGET', k, 'lt')), '^(%d+) (%d+) (%d+) (%d+) (%d+) (%d+) (%d+) (%d+) (%d+)$')}
  if #lt == 9 and #lt[8] <= 16 then
    for i = 1, 9 do answer[14 + i] = tonumber(lt[i]) end
    answer[21] = math.max(0, now - answer[21])
  else
    for i = 1, 9 do answer[14 + i] = 0 end
    answer[15] = -1
  end
end
return answer
