-- fusebox: one circuit breaker in one Redis hash. Admission and outcome recording, atomically.
--
-- KEYS[1]  the breaker's hash, `{prefix:key}`
-- ARGV[1]  op: `admit`, `report`, `force` or `state`
-- ARGV[2]  time in milliseconds supplied by a test clock, or '' to read Redis `TIME`
-- ARGV[3]  idle TTL (ms)      ARGV[4]  count window (calls), or 2^40 + the slice (ms) of a time
--          window of ten slices   ARGV[5]  min_calls
-- ARGV[6]  failure rate (%, 0 = off)   ARGV[7]  slow rate (%, 0 = off)   ARGV[8]  consecutive (0 = off)
-- ARGV[9]  open_for (ms)       ARGV[10] open_backoff (factor x 1000)     ARGV[11] open_max (ms)
-- ARGV[12] half-open probes, or 2^40 + phases * 2^20 + min_passes for progressive recovery
-- ARGV[13] probe lease (ms)   ARGV[14] failure count (failures in the window that open it, 0 = off)
-- report:  ARGV[15] generation modulo 1024  ARGV[16] outcome (0 released, 1 success, 2 failure)  ARGV[17] slow (0/1)
-- force:   ARGV[15] target state
-- admit:   ARGV[15] the replica's local state, ARGV[16] its open remaining (ms): used only when
--          the key does not exist (first share of a breaker already in use, or Redis restarted
--          and lost the state), so an open circuit stays open
--
-- Returns {code, state, generation, open remaining (ms), committed-from (-1: no transition),
--          calls, failures, reset (1: malformed data was found and the key reset), rule, slow,
--          window calls, window failures}
-- rule: what committed the transition (0 with no transition): 1 failure_rate, 2 slow_rate,
--       3 consecutive, 4 failure_count, 5 open_wait_over, 6 lease_expired, 7 probe_failed,
--       8 probes_passed, 9 phase_passed, 10 operator (`force`)
-- calls, failures, slow: the window (or the probes) that decided the transition
-- window calls, window failures: the current window after this call, what operators see (-1 when
--       this call did not read a closed time window's buckets: an admission or a stale report)
-- admit codes: 0 refused (open), 1 admitted, 2 admitted as a probe, 3 refused (probes taken),
--              4 refused (forced open), 5 refused (recovering: not this phase's share).   report codes: 0 stale (changes nothing), 1 applied.
-- States: 0 closed, 1 open, 2 half-open, 3 forced open, 4 disabled.
--
-- The count window is a ring of `w` slots `r0..r{w-1}` with running totals, so every call is O(1)
-- in the window size. A slot holds `generation * 8 + code`; slots of an older generation count as
-- empty, so a transition clears the window without touching it. A time window is ten buckets
-- `t0..t9`, each `generation:slice:calls:failures:slow`; totals sum the buckets of the current
-- generation whose slice is among the last ten (ten reads: O(1) in the window's size).
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
local failure_count = tonumber(ARGV[14])

local FIELDS = {'v', 'st', 'g', 'dl', 'iss', 'pas', 'arm', 'n', 'f', 's', 'cur', 'run', 'ro', 'w', 'ph', 'sq', 'pf'}
-- Fields a key may lack (written only by progressive recovery): read as 0.
local OPTIONAL = 15
local reset = 0
local h = redis.pcall('HMGET', k, unpack(FIELDS))
local ok = type(h) == 'table' and h.err == nil
if ok and h[1] then
  if h[1] ~= 'fb1' then ok = false end
  for i = 2, #FIELDS do
    if ok and tonumber(h[i]) == nil and not (i >= OPTIONAL and not h[i]) then ok = false end
  end
end
if not ok then
  -- Not ours, or not readable: reset the key (the caller reports it).
  redis.call('DEL', k)
  reset = 1
  h = {}
end
local b = {}
if h[1] then
  for i = 2, #FIELDS do b[FIELDS[i]] = tonumber(h[i]) or 0 end
else
  -- A new key: generations start at the current second, so they do not go backwards across a
  -- restart that lost the state, and a result admitted before the loss stays stale.
  b = {st = 0, g = math.floor(now / 1000), dl = 0, iss = 0, pas = 0, arm = 0, n = 0, f = 0, s = 0, cur = 0, run = 0, ro = 0, w = w, ph = 0, sq = 0, pf = 0}
  local seed = op == 'admit' and tonumber(ARGV[15]) or 0
  if seed == 1 or seed == 3 or seed == 4 then
    b.st = seed
    if seed == 1 then b.dl = now + (tonumber(ARGV[16]) or open_for) end
  end
end
-- The generation the caller may hold: a change is published to cached replicas.
local g0 = b.g
if b.w ~= w or (slice_ms == 0 and b.cur >= w) then
  -- The window length changed: start an empty window.
  b.g = b.g + 1
  b.n, b.f, b.s, b.cur, b.w = 0, 0, 0, 0, w
end
local dirty = not h[1]
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

-- The rule a closed circuit trips by after an outcome (`failure`: 1 when it failed), 0 for none;
-- checked in the order the in-memory breaker checks them.
local function trip_rule(failure)
  if consecutive > 0 and b.run >= consecutive then return 3 end
  -- `failure_count`: the window's failures, whatever the rate and `min_calls`.
  if failure == 1 and failure_count > 0 and b.f >= failure_count then return 4 end
  if b.n >= min_calls then
    if rate > 0 and b.f * 100 >= rate * b.n then return 1 end
    if slow_rate > 0 and b.s * 100 >= slow_rate * b.n then return 2 end
  end
  return 0
end

-- The time window's totals at `now` (calls, failures, slow), and the current slice.
local function time_totals()
  local slice = math.floor(now / slice_ms) + 1
  local fields = {}
  for i = 0, 9 do fields[i + 1] = 't' .. i end
  local raw = redis.call('HMGET', k, unpack(fields))
  local n, f, s = 0, 0, 0
  for i = 1, 10 do
    if raw[i] then
      local g, sl, c, fl, sw = string.match(raw[i], '^(%d+):(%d+):(%d+):(%d+):(%d+)$')
      g, sl = tonumber(g), tonumber(sl)
      if g == b.g and sl and sl <= slice and sl > slice - 10 then
        n, f, s = n + tonumber(c), f + tonumber(fl), s + tonumber(sw)
      end
    end
  end
  return n, f, s, slice
end

local function remaining()
  if b.st == 1 and b.dl > now then return b.dl - now end
  return 0
end

local code = 0
local calls, failures, slow_calls = 0, 0, 0
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
    elseif now - b.arm >= lease then
      -- The probes never reported within their lease (their replica died): re-arm.
      local ro = b.ro
      calls, failures, slow_calls = b.n, b.f, b.s
      move(2)
      rule = 6
      b.ro = ro
      b.iss, b.arm = 1, now
      code = 2
    else
      code = 3
    end
  end
elseif op == 'report' then
  local gen = tonumber(ARGV[15])
  local outcome = tonumber(ARGV[16])
  local slow = tonumber(ARGV[17])
  -- A permit keeps its generation modulo 2^10.
  if gen ~= b.g % 1024 then
    code = 0
  elseif b.st == 0 or b.st == 4 then
    code = 1
    if outcome ~= 0 and slice_ms > 0 then
      local failure = outcome == 2 and 1 or 0
      local slice = math.floor(now / slice_ms) + 1
      local field = 't' .. (slice % 10)
      local c, fl, sw = 0, 0, 0
      local old = redis.call('HGET', k, field)
      if old then
        local g, sl, oc, ofl, osw = string.match(old, '^(%d+):(%d+):(%d+):(%d+):(%d+)$')
        if tonumber(g) == b.g and tonumber(sl) == slice then
          c, fl, sw = tonumber(oc), tonumber(ofl), tonumber(osw)
        end
      end
      redis.call('HSET', k, field, b.g .. ':' .. slice .. ':' .. (c + 1) .. ':' .. (fl + failure) .. ':' .. (sw + slow))
      b.n, b.f, b.s = time_totals()
      if failure == 1 then b.run = b.run + 1 else b.run = 0 end
      counted = true
      if b.st == 0 then
        rule = trip_rule(failure)
        if rule > 0 then calls, failures, slow_calls = open(0) end
      end
    elseif outcome ~= 0 then
      local failure = outcome == 2 and 1 or 0
      local field = 'r' .. b.cur
      local old = tonumber(redis.call('HGET', k, field) or '0') or 0
      if old > 0 and math.floor(old / 8) == b.g then
        local c = old % 8 - 1
        b.n = b.n - 1
        b.f = b.f - c % 2
        b.s = b.s - math.floor(c / 2)
      end
      redis.call('HSET', k, field, b.g * 8 + 1 + failure + 2 * slow)
      b.cur = (b.cur + 1) % w
      b.n = b.n + 1
      b.f = b.f + failure
      b.s = b.s + slow
      if failure == 1 then b.run = b.run + 1 else b.run = 0 end
      counted = true
      if b.st == 0 then
        rule = trip_rule(failure)
        if rule > 0 then calls, failures, slow_calls = open(0) end
      end
    end
  elseif b.st == 2 and phases > 0 then
    code = 1
    if outcome ~= 0 then
      b.pas = b.pas + 1
      if outcome == 2 then b.pf = b.pf + 1 end
      dirty = true
      if b.pas >= min_passes then
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
    end
  elseif b.st == 2 then
    code = 1
    if outcome == 1 then
      b.pas = b.pas + 1
      dirty = true
      if b.pas >= probes then
        calls = b.pas
        move(0)
        rule = 8
        b.ro = 0
      end
    elseif outcome == 2 then
      calls, failures = b.pas + 1, 1
      open(b.ro + 1)
      rule = 7
    else
      if b.iss > 0 then b.iss = b.iss - 1 end
      dirty = true
    end
  else
    code = 0
  end
elseif op == 'force' then
  local target = tonumber(ARGV[15])
  calls, failures, slow_calls = b.n, b.f, b.s
  if target ~= b.st then move(target); rule = 10 else b.g = b.g + 1; b.n, b.f, b.s, b.run = 0, 0, 0, 0; dirty = true end
  b.ro = 0
  code = 1
elseif op == 'state' then
  code = 1
  if slice_ms > 0 and (b.st == 0 or b.st == 4) then b.n, b.f = time_totals() end
  calls, failures = b.n, b.f
else
  return redis.error_reply('fusebox: unknown op ' .. tostring(op))
end

if dirty then
  redis.call('HSET', k, 'v', 'fb1', 'st', b.st, 'g', b.g, 'dl', b.dl, 'iss', b.iss, 'pas', b.pas,
    'arm', b.arm, 'n', b.n, 'f', b.f, 's', b.s, 'cur', b.cur, 'run', b.run, 'ro', b.ro, 'w', b.w,
    'ph', b.ph, 'sq', b.sq, 'pf', b.pf)
elseif counted then
  redis.call('HSET', k, 'n', b.n, 'f', b.f, 's', b.s, 'cur', b.cur, 'run', b.run)
end
-- The idle TTL restarts on every write (an admission on a closed circuit writes nothing).
if dirty or counted then
  redis.call('PEXPIRE', k, ttl)
end
-- Cached replicas learn every new generation (a transition, a forced state, a new window) from
-- this message: `state generation open-remaining-ms key`.
if b.g ~= g0 then
  redis.call('PUBLISH', 'fusebox:transitions', b.st .. ' ' .. b.g .. ' ' .. remaining() .. ' ' .. k)
end
local wn, wf = b.n, b.f
if slice_ms > 0 and (b.st == 0 or b.st == 4) and (op == 'admit' or (op == 'report' and not counted)) then
  wn, wf = -1, -1
end
return {code, b.st, b.g, remaining(), from, calls, failures, reset, rule, slow_calls, wn, wf}
