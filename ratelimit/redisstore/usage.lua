-- Sluice usage-based limits: after-the-fact charges and reservations.
-- This script is appended to ratelimit.lua's helpers (everything before its
-- main loop, see usage.go), so it shares their state formats and
-- arithmetic; its own functions translate ratelimit/usagealgo.go and
-- usage_memory.go line by line.
--
-- ARGV[1]  clock override in Unix µs, or '' for the server's TIME (tests only)
-- ARGV[2]  operation: 'h' hold, 's' settle, 'g' charge
-- 'h'  ARGV[3] mode ('n' charge now, 's' on settle), [4] ttl µs, [5] record,
--      [6] number of checks, then checks, then the number of counters and
--      each one's bound; KEYS[1] the record, then one per check, then one
--      per counter (a sorted set of the unsettled reservations of a
--      check's key, scored by expiry).
--      Reply: now, status (1 held, 0 refused, 4 a counter at its bound, nothing
--      taken and no decisions), then per check allowed, remaining, retry µs, reset µs.
-- 's'  ARGV[3] the record as read, [4] cost, [5] mode, [6] held at µs,
--      [7] expires at µs, [8] number of checks, then checks, then the
--      number of counters; KEYS as for 'h'.
--      Reply: now, status (1 settled, 2 unknown or expired, 3 already settled).
-- 'g'  ARGV[3] number of checks, then checks; KEYS one per check.
--      Reply: now, 1, then per check as for 'h' (the key after the charge).
-- A check is: algorithm, limit, period µs, burst, max debt, cost (the
-- estimate), entry id, fixed ('1' or '0').

local function ceiling(p, maxdebt)
  if maxdebt == 0 then return MAXEXACT - 1 end
  return p.limit + maxdebt
end

local function readchecks(i, n, k0)
  local cs = {}
  for j = 1, n do
    cs[j] = { p = prep(ARGV[i], tonumber(ARGV[i + 1]), tonumber(ARGV[i + 2]), tonumber(ARGV[i + 3])),
      maxdebt = tonumber(ARGV[i + 4]), cost = tonumber(ARGV[i + 5]), id = ARGV[i + 6],
      fixed = ARGV[i + 7] == '1', key = KEYS[k0 + j] }
    i = i + 8
  end
  return cs
end

-- charge adds cost without refusing, as far as the max debt allows.
local function charge(c, cost, id)
  local p, key = c.p, c.key
  if p.alg == 'l' or p.alg == 'k' then
    local _, n, sum = times(p, key, 0)
    local add = math.min(cost, ceiling(p, c.maxdebt) - sum)
    if add > 0 then push(p, key, n, sum, add, id) end
    return
  end
  local st = load(p, key)
  if p.alg == 'b' or p.alg == 'g' then
    local lvl = level(p, st)
    local floor = p.cap - (MAXEXACT - 1)
    local d = c.maxdebt * p.unit
    if c.maxdebt > 0 and d < MAXEXACT then floor = math.max(floor, -d) end
    local need = cost * p.unit
    local nl = lvl - need
    if need >= MAXEXACT or lvl - need < floor then nl = math.min(lvl, floor) end
    setlevel(p, st, nl)
    save(p, key, st, now + cdiv(p.cap - nl, p.rate))
    return
  end
  roll(p, st)
  if p.alg == 'f' then
    st.b = math.max(st.b, math.min(ceiling(p, c.maxdebt), st.b + cost))
    local exp = now
    if st.b > 0 then exp = (st.a + 1) * p.period end
    save(p, key, st, exp)
    return
  end
  st.c = math.max(st.c, math.min(ceiling(p, c.maxdebt), st.c + cost))
  save(p, key, st, now + counterreset(p, st))
end

-- reducelog takes x off the log entry id of cost est, if it still counts.
local function reducelog(key, id, est, x)
  local m = id .. ':' .. fmt(est)
  local score = redis.call('ZSCORE', key, m)
  if not score then return end
  redis.call('ZREM', key, m)
  if est > x then redis.call('ZADD', key, score, id .. ':' .. fmt(est - x)) end
  local sum = total(key)
  settotal(key, sum, math.max(0, sum - math.min(est, x)))
end

-- Both modes charged the estimate at hold; 's' differs only in giving a
-- fixed check's estimate back when settled with 0.
local function settledelta(c, mode, cost)
  if c.fixed then
    if mode == 's' and cost == 0 then return -c.cost end
    return 0
  end
  return cost - c.cost
end

-- counters returns the counter keys after n checks, from ARGV[i].
local function counters(i, n)
  local ks = {}
  for j = 1, tonumber(ARGV[i]) do ks[j] = KEYS[1 + n + j] end
  return ks
end

local function release(ks)
  for _, k in ipairs(ks) do redis.call('ZREM', k, KEYS[1]) end
end

local op = ARGV[2]
local out = { now, 1 }
if op == 'h' then
  local mode, ttl, rec = ARGV[3], tonumber(ARGV[4]), ARGV[5]
  local n = tonumber(ARGV[6])
  local ci = 7 + 8 * n
  local ks = counters(ci, n)
  for j, k in ipairs(ks) do
    redis.call('ZREMRANGEBYSCORE', k, '-inf', now)
    if redis.call('ZCARD', k) >= tonumber(ARGV[ci + j]) then return { now, 4 } end
  end
  local cs = readchecks(7, n, 1)
  for _, c in ipairs(cs) do
    c.st = load(c.p, c.key)
    local v
    v, c.exp = step(c.p, c.key, c.st, c.cost, false, 0)
    if v[1] ~= 1 then out[2] = 0 end
    for k = 1, 4 do out[#out + 1] = v[k] end
  end
  if out[2] == 1 then
    for _, c in ipairs(cs) do
      -- every mode charges now: unsettled reservations count
      if c.p.alg == 'l' or c.p.alg == 'k' then
        push(c.p, c.key, c.st.n, c.st.sum, c.cost, c.id)
      else
        save(c.p, c.key, c.st, c.exp)
      end
    end
    local ms = math.max(1, cdiv(ttl, 1000))
    redis.call('SET', KEYS[1], rec .. '|' .. fmt(now) .. '|' .. fmt(now + ttl), 'PX', ms)
    for _, k in ipairs(ks) do
      redis.call('ZADD', k, now + ttl, KEYS[1])
      if redis.call('PTTL', k) < ms then redis.call('PEXPIRE', k, ms) end
    end
  end
elseif op == 's' then
  local v = redis.call('GET', KEYS[1])
  if v == 'settled' then return { now, 3 } end
  if (not v) or v ~= ARGV[3] then return { now, 2 } end
  local n = tonumber(ARGV[8])
  local ks = counters(9 + 8 * n, n)
  release(ks)
  if now >= tonumber(ARGV[7]) then
    redis.call('DEL', KEYS[1])
    return { now, 2 }
  end
  local cost, mode, at = tonumber(ARGV[4]), ARGV[5], ARGV[6]
  for _, c in ipairs(readchecks(9, n, 1)) do
    if c.p.alg == 'k' then
      unpush(c.key, c.cost, c.id)
    else
      local d = settledelta(c, mode, cost)
      if d > 0 then
        charge(c, d, c.id .. '+')
      elseif d < 0 then
        if c.p.alg == 'l' then reducelog(c.key, c.id, c.cost, -d) else refund(c.p, c.key, -d, at) end
      end
    end
  end
  -- a tombstone, so a second settle is known as one, for a minute at most
  local left = redis.call('PTTL', KEYS[1])
  if left < 0 or left > 60000 then left = 60000 end
  redis.call('SET', KEYS[1], 'settled', 'PX', math.max(1, left))
elseif op == 'g' then
  for _, c in ipairs(readchecks(4, tonumber(ARGV[3]), 0)) do
    if c.cost > 0 then charge(c, c.cost, c.id) end
    local v = peek(c.p, c.key)
    for k = 1, 4 do out[#out + 1] = v[k] end
  end
end
return out
