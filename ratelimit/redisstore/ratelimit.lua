-- Sluice rate limiter: a batch of operations, each one atomic, in one call.
-- A line-by-line translation of ratelimit/algo.go; keep the two in step.
-- Every number stays an integer below 2^53, exact in Lua's doubles.
--
-- ARGV[1]  clock override in Unix µs, or '' for the server's TIME (tests only)
-- ARGV[2]  number of policies; then per policy: algorithm ('b','g','f','c',
--          'l','k'), limit, period µs, burst
-- then     number of fast groups; then per group: policy index, cost,
--          number of checks n; each check a single-check allow 'a' on a
--          token bucket, GCRA or fixed window, its key the next of KEYS
--          (fastbucket, fastwindow)
-- then     number of operations; then per operation: code ('a' allow
--          all-or-nothing, 'e' evaluate only (as 'a', charging nothing),
--          'u' refund an 'a' that was allowed, 'r' reserve, 'c' cancel,
--          'p' peek, 'x' reset, 'l' release), number of checks, and per
--          check: policy index (1-based), cost, extra (the entry id for 'l'
--          and 'k' allows, refunds and releases; max wait µs for 'r'; until
--          µs for 'c'; for 'f' and 'c' refunds, the refunded allow's now).
-- KEYS: one per check, in order.
-- Reply: now, then per fast check the bucket's level after the check
-- minus what it needed (>= 0 when allowed), or for a fixed window what it
-- has left minus cost and the µs to its end, then per operation: status (1 allowed), and per check:
-- allowed, remaining, retry µs, reset µs, delay µs.
-- States of the scalar algorithms are little-endian doubles (struct.pack);
-- the fast section writes a third, the end of the key's expiry, and sets
-- that expiry to twice the time to full, so that the next writes keep it
-- (SET KEEPTTL) while it lasts: a key full again lingers at most that long.

local MAXEXACT = 9007199254740992

local now
if ARGV[1] ~= '' then
  now = tonumber(ARGV[1])
else
  local t = redis.call('TIME')
  now = tonumber(t[1]) * 1000000 + tonumber(t[2])
end

local floor, ceil = math.floor, math.ceil

-- floor(a/b) for 0 <= a, 0 < b, exact.
local function fdiv(a, b)
  local q = floor(a / b)
  if q * b > a then q = q - 1 elseif (q + 1) * b <= a then q = q + 1 end
  return q
end

local function cdiv(a, b)
  if a <= 0 then return 0 end
  local q = fdiv(a, b)
  if q * b < a then q = q + 1 end
  return q
end

local function gcd(a, b)
  while b ~= 0 do a, b = b, a - fdiv(a, b) * b end
  return a
end

local function prep(alg, limit, period, burst)
  local p = { alg = alg, limit = limit, period = period }
  if alg == 'b' or alg == 'g' then
    if burst == 0 then burst = limit end
    local unit, rate = period, limit
    if burst * unit >= MAXEXACT then
      local g = gcd(unit, rate)
      unit, rate = unit / g, rate / g
    end
    p.limit, p.unit, p.rate, p.cap = burst, unit, rate, burst * unit
  end
  return p
end

local policies = {}
local ai = 3
for i = 1, tonumber(ARGV[2]) do
  policies[i] = prep(ARGV[ai], tonumber(ARGV[ai + 1]), tonumber(ARGV[ai + 2]), tonumber(ARGV[ai + 3]))
  ai = ai + 4
end

-- fastbucket runs n single-check allows of cost on the token bucket or
-- GCRA p, keys from KEYS[ki]: step and save of the general path without a
-- table per check, each answered with one number (see the header). Each
-- key is read with GET, not all at once with MGET, which would answer nil
-- for a key of another type (and the SET overwrite it) where GET replies
-- WRONGTYPE.
local function fastbucket(p, cost, n, ki, out, no)
  local cap, rate, need = p.cap, p.rate, cost * p.unit
  local gcra = p.alg == 'g'
  for _ = 1, n do
    local key = KEYS[ki]
    local v = redis.call('GET', key)
    ki = ki + 1
    -- the state, and when the key's expiry (set here before) ends
    local s1, s2, held = nil, nil, 0
    if v then
      if #v >= 24 then s1, s2, held = struct.unpack('<ddd', v) else s1, s2 = struct.unpack('<dd', v) end
    end
    local lvl, t
    if gcra then
      local tat, rem = s1 or 0, s2 or 0
      lvl = cap
      if tat > now then lvl = cap - ((tat - now) * rate + rem) elseif tat == now then lvl = cap - rem end
    else
      if v then lvl, t = s1, s2 else lvl, t = cap, now end
      if now > t then
        local gained = (now - t) * rate
        if gained >= MAXEXACT or lvl + gained >= cap then lvl = cap else lvl = lvl + gained end
        t = now
      end
    end
    local x = lvl - need
    if x >= 0 then
      local reset = cdiv(cap - x, rate)
      local a, b = x, t
      if gcra then
        local d = cap - x
        local q = fdiv(d, rate)
        a, b = now + q, d - q * rate
      end
      if reset <= 0 then
        redis.call('DEL', key)
      elseif now + reset <= held then
        -- The expiry in place outlasts the time to full: keep it, which
        -- spares Redis most of a write's work.
        redis.call('SET', key, struct.pack('<ddd', a, b, held), 'KEEPTTL')
      else
        -- Twice the time to full, so that the next checks keep it; held
        -- is rounded down to the millisecond Redis counts from.
        local ms = cdiv(2 * reset, 1000)
        redis.call('SET', key, struct.pack('<ddd', a, b, now + ms * 1000 - 1000), 'PX', string.format('%d', ms))
      end
    end
    no = no + 1
    out[no] = x
  end
  return ki, no
end

-- fastwindow is fastbucket for a fixed window: each check answered with
-- two numbers, what the window has left minus cost (>= 0 when allowed)
-- and the µs to the window's end. A window's writes keep the expiry its first one set.
local function fastwindow(p, cost, n, ki, out, no)
  local limit, period = p.limit, p.period
  local idx = fdiv(now, period)
  for _ = 1, n do
    local key = KEYS[ki]
    local v = redis.call('GET', key)
    ki = ki + 1
    local a, b, held = idx, 0, 0
    if v then
      if #v >= 24 then a, b, held = struct.unpack('<ddd', v) else a, b = struct.unpack('<dd', v) end
      if idx > a then a, b = idx, 0 end
    end
    local e = (a + 1) * period
    local x = limit - b - cost
    if x >= 0 then
      if held == e then
        redis.call('SET', key, struct.pack('<ddd', a, b + cost, e), 'KEEPTTL')
      else
        redis.call('SET', key, struct.pack('<ddd', a, b + cost, e), 'PX', string.format('%d', cdiv(e - now, 1000)))
      end
    end
    out[no + 1], out[no + 2] = x, e - now
    no = no + 2
  end
  return ki, no
end

local out, no = { now }, 1
local ki = 1
local nfast = tonumber(ARGV[ai])
ai = ai + 1
for _ = 1, nfast do
  local p = policies[tonumber(ARGV[ai])]
  local run = fastbucket
  if p.alg == 'f' then run = fastwindow end
  ki, no = run(p, tonumber(ARGV[ai + 1]), tonumber(ARGV[ai + 2]), ki, out, no)
  ai = ai + 3
end
local nops = tonumber(ARGV[ai])
ai = ai + 1
-- Most calls carry only fast checks: return before the general path's
-- functions are even made (each call runs the whole chunk).
if nops == 0 then return out end

local function load(p, key)
  local st = {}
  if p.alg == 'l' or p.alg == 'k' then return st end
  local v = redis.call('GET', key)
  if not v then
    if p.alg == 'b' then st.a, st.t = p.cap, now
    elseif p.alg == 'g' then st.a, st.b = 0, 0
    else st.a, st.b, st.c = fdiv(now, p.period), 0, 0 end
    return st
  end
  if p.alg == 'b' then st.a, st.t = struct.unpack('<dd', v)
  elseif p.alg == 'c' then st.a, st.b, st.c = struct.unpack('<ddd', v)
  else st.a, st.b = struct.unpack('<dd', v) end
  return st
end

local function save(p, key, st, exp)
  local ms = cdiv(exp - now, 1000)
  if ms <= 0 then
    redis.call('DEL', key)
    return
  end
  local v
  if p.alg == 'b' then v = struct.pack('<dd', st.a, st.t)
  elseif p.alg == 'c' then v = struct.pack('<ddd', st.a, st.b, st.c)
  else v = struct.pack('<dd', st.a, st.b) end
  redis.call('SET', key, v, 'PX', ms)
end

local function level(p, st)
  if p.alg == 'g' then
    local d = 0
    if st.a > now then d = (st.a - now) * p.rate + st.b elseif st.a == now then d = st.b end
    return p.cap - d
  end
  local lvl = st.a
  local elapsed = now - st.t
  if elapsed > 0 then
    local gained = elapsed * p.rate
    if gained >= MAXEXACT then lvl = p.cap else lvl = math.min(p.cap, lvl + gained) end
  end
  return lvl
end

local function setlevel(p, st, lvl)
  if p.alg == 'g' then
    local d = p.cap - lvl
    if d <= 0 then st.a, st.b = now, 0 return end
    local q = fdiv(d, p.rate)
    st.a, st.b = now + q, d - q * p.rate
    return
  end
  st.a = lvl
  if now > st.t then st.t = now end
end

local function trunc(lvl, unit)
  if lvl <= 0 then return 0 end
  return fdiv(lvl, unit)
end

-- verdicts are {allowed, remaining, retry, reset, delay}
local function bucket(p, st, cost, reserve, maxwait)
  local lvl = level(p, st)
  local need = cost * p.unit
  if lvl >= need then
    local after = lvl - need
    return { 1, fdiv(after, p.unit), 0, cdiv(p.cap - after, p.rate), 0 }, after
  end
  local wait = cdiv(need - lvl, p.rate)
  if reserve and wait <= maxwait and lvl - need >= p.cap - (MAXEXACT - 1) then
    local after = lvl - need
    return { 1, 0, 0, cdiv(p.cap - after, p.rate), wait }, after
  end
  return { 0, trunc(lvl, p.unit), wait, cdiv(p.cap - lvl, p.rate), 0 }, lvl
end

local function roll(p, st)
  local idx = fdiv(now, p.period)
  if idx <= st.a then return end
  if p.alg == 'c' and idx == st.a + 1 then st.b, st.c = st.c, 0 else st.b, st.c = 0, 0 end
  st.a = idx
end

local function fixed(p, st, cost)
  roll(p, st)
  local e = (st.a + 1) * p.period
  if st.b + cost <= p.limit then return { 1, p.limit - st.b - cost, 0, e - now, 0 } end
  local reset = 0
  if st.b > 0 then reset = e - now end
  return { 0, p.limit - st.b, e - now, reset, 0 }
end

local function weight(prev, period, x)
  if prev == 0 then return 0 end
  return ceil(prev * (period - x) / period)
end

local function firstfit(prev, period, room, lo)
  local f = floor(room * period / prev)
  local x = lo
  if f < period then x = math.max(period - f, lo) end
  while x > lo and weight(prev, period, x - 1) <= room do x = x - 1 end
  while weight(prev, period, x) > room do x = x + 1 end
  return x
end

local function counterreset(p, st)
  if st.c > 0 then return st.a * p.period + 2 * p.period - now end
  if st.b > 0 then return st.a * p.period + p.period - now end
  return 0
end

local function counter(p, st, cost)
  roll(p, st)
  local start = st.a * p.period
  local e = math.max(0, now - start)
  local used = st.c + weight(st.b, p.period, e)
  if used + cost <= p.limit then return { 1, p.limit - used - cost, 0, start + 2 * p.period - now, 0 } end
  local v = { 0, math.max(0, p.limit - used), 0, counterreset(p, st), 0 }
  if st.c + cost <= p.limit then
    v[3] = firstfit(st.b, p.period, p.limit - st.c - cost, e) - e
  else
    v[3] = start + p.period - now + firstfit(st.c, p.period, p.limit - cost, 0)
  end
  return v
end

-- Sliding log and concurrency: a sorted set with one member per admitted
-- request (or lease), '<id>:<cost>', scored by when it stops counting, and
-- one member '#<total>' scored -inf holding the others' total cost, so
-- that a check's work depends neither on its cost nor on how many requests
-- the window holds (dropping an entry costs once, when it ends).
local function fmt(x) return string.format('%d', x) end

local function costof(m) return tonumber(string.match(m, ':(%d+)$')) end

local function total(key)
  local t = redis.call('ZRANGE', key, 0, 0)
  if t[1] and string.byte(t[1]) == 35 then return tonumber(string.sub(t[1], 2)) end
  return 0
end

local function settotal(key, old, new)
  if old == new then return end
  if old > 0 then redis.call('ZREM', key, '#' .. fmt(old)) end
  if new > 0 then redis.call('ZADD', key, '-inf', '#' .. fmt(new)) end
end

-- newest returns the latest end in the log, or 0 for an empty one.
local function newest(key)
  local t = redis.call('ZRANGE', key, -1, -1, 'WITHSCORES')
  if t[1] and string.byte(t[1]) ~= 35 then return tonumber(t[2]) end
  return 0
end

-- nth returns the end of the k-th unit of cost, counting from the oldest.
local function nth(key, k, nw)
  local cum, i = 0, 1
  while true do
    local page = redis.call('ZRANGE', key, i, i + 99, 'WITHSCORES')
    if #page == 0 then return nw end
    for j = 1, #page, 2 do
      cum = cum + costof(page[j])
      if cum >= k then return tonumber(page[j + 1]) end
    end
    i = i + 100
  end
end

-- times evaluates a log or concurrency check after dropping the entries
-- that no longer count. Returns the verdict, the (clamped) now and the total.
local function times(p, key, cost)
  local n = now
  local nw = newest(key)
  if nw > n + p.period then n = nw - p.period end
  local sum = total(key)
  local gone = redis.call('ZRANGEBYSCORE', key, '(-inf', n)
  if #gone > 0 then
    local left = sum
    for _, m in ipairs(gone) do left = left - costof(m) end
    redis.call('ZREMRANGEBYSCORE', key, '(-inf', n)
    settotal(key, sum, left)
    sum = left
  end
  if sum + cost <= p.limit then return { 1, p.limit - sum - cost, 0, p.period, 0 }, n, sum end
  return { 0, p.limit - sum, nth(key, sum + cost - p.limit, nw) - n, nw - n, 0 }, n, sum
end

local function push(p, key, n, sum, cost, id)
  local e = n + p.period
  redis.call('ZADD', key, e, id .. ':' .. fmt(cost))
  settotal(key, sum, sum + cost)
  redis.call('PEXPIRE', key, math.max(1, cdiv(e - now, 1000)))
end

-- unpush removes entry id of cost, if it still counts.
local function unpush(key, cost, id)
  if redis.call('ZREM', key, id .. ':' .. fmt(cost)) == 1 then
    local sum = total(key)
    settotal(key, sum, math.max(0, sum - cost))
  end
end

-- refund gives back what an allowed 'a' check charged, as far as it still
-- counts: the bucket's level (up to its capacity), the window's count if
-- the window (or, for the counter, the previous one) is the one charged at
-- at, the log's or lease's entry.
local function refund(p, key, cost, extra)
  if p.alg == 'l' or p.alg == 'k' then
    unpush(key, cost, extra)
    return
  end
  local st = load(p, key)
  if p.alg == 'b' or p.alg == 'g' then
    local lvl = math.min(p.cap, level(p, st) + cost * p.unit)
    setlevel(p, st, lvl)
    save(p, key, st, now + cdiv(p.cap - lvl, p.rate))
    return
  end
  local idx = fdiv(tonumber(extra), p.period)
  roll(p, st)
  if p.alg == 'f' then
    local exp = now
    if st.a == idx then st.b = math.max(0, st.b - cost) end
    if st.b > 0 then exp = (st.a + 1) * p.period end
    save(p, key, st, exp)
    return
  end
  if st.a == idx then st.c = math.max(0, st.c - cost)
  elseif st.a == idx + 1 then st.b = math.max(0, st.b - cost) end
  save(p, key, st, now + counterreset(p, st))
end

-- step evaluates one check; st is consumed in place when allowed (scalars).
local function step(p, key, st, cost, reserve, maxwait)
  if p.alg == 'b' or p.alg == 'g' then
    local v, lvl = bucket(p, st, cost, reserve, maxwait)
    if v[1] == 1 then setlevel(p, st, lvl) end
    return v, now + v[4]
  elseif p.alg == 'f' then
    local v = fixed(p, st, cost)
    if v[1] == 1 then st.b = st.b + cost end
    return v, now + v[4]
  elseif p.alg == 'c' then
    local v = counter(p, st, cost)
    if v[1] == 1 then st.c = st.c + cost end
    return v, now + v[4]
  end
  local v, n, sum = times(p, key, cost)
  st.n, st.sum = n, sum
  return v, n + v[4]
end

local function peek(p, key)
  local st = load(p, key)
  local cp = {}
  for k, x in pairs(st) do cp[k] = x end
  local v = step(p, key, cp, 1, false, 0)
  if p.alg == 'b' or p.alg == 'g' then
    local lvl = level(p, st)
    v[2], v[4] = trunc(lvl, p.unit), cdiv(p.cap - lvl, p.rate)
  elseif p.alg == 'f' then
    roll(p, st)
    v[2], v[4] = p.limit - st.b, 0
    if st.b > 0 then v[4] = (st.a + 1) * p.period - now end
  elseif p.alg == 'c' then
    roll(p, st)
    local e = math.max(0, now - st.a * p.period)
    v[2] = math.max(0, p.limit - st.c - weight(st.b, p.period, e))
    v[4] = counterreset(p, st)
  else
    local sum = cp.sum
    v[2], v[4] = p.limit - sum, 0
    if sum > 0 then v[4] = newest(key) - cp.n end
  end
  return v
end

for _ = 1, nops do
  local code, nchecks = ARGV[ai], tonumber(ARGV[ai + 1])
  ai = ai + 2
  local checks = {}
  for i = 1, nchecks do
    checks[i] = { p = policies[tonumber(ARGV[ai])], key = KEYS[ki], cost = tonumber(ARGV[ai + 1]), extra = ARGV[ai + 2] }
    ki, ai = ki + 1, ai + 3
  end
  local status, vs = 1, {}
  if code == 'a' or code == 'e' or code == 'r' then
    for i = 1, nchecks do
      local c = checks[i]
      c.st = load(c.p, c.key)
      local maxwait = 0
      if code == 'r' then maxwait = tonumber(c.extra) end
      vs[i], c.exp = step(c.p, c.key, c.st, c.cost, code == 'r', maxwait)
      if vs[i][1] ~= 1 then status = 0 end
    end
    if status == 1 and code ~= 'e' then
      for i = 1, nchecks do
        local c = checks[i]
        if c.p.alg == 'l' or c.p.alg == 'k' then
          push(c.p, c.key, c.st.n, c.st.sum, c.cost, c.extra)
        else
          save(c.p, c.key, c.st, c.exp)
        end
      end
    elseif code ~= 'r' then
      -- Nothing was charged: a check that would pass reports its key as
      -- it is (uncharged in algo.go), not as after the charge.
      for i = 1, nchecks do
        if vs[i][1] == 1 then
          local pv = peek(checks[i].p, checks[i].key)
          vs[i][2], vs[i][4] = pv[2], pv[4]
        end
      end
    end
  elseif code == 'p' then
    vs[1] = peek(checks[1].p, checks[1].key)
  elseif code == 'x' then
    redis.call('DEL', checks[1].key)
  elseif code == 'c' then
    local c = checks[1]
    if now < tonumber(c.extra) then
      local st = load(c.p, c.key)
      local lvl = math.min(c.p.cap, level(c.p, st) + c.cost * c.p.unit)
      setlevel(c.p, st, lvl)
      save(c.p, c.key, st, now + cdiv(c.p.cap - lvl, c.p.rate))
    end
  elseif code == 'u' then
    for i = 1, nchecks do
      local c = checks[i]
      refund(c.p, c.key, c.cost, c.extra)
    end
  elseif code == 'l' then
    local c = checks[1]
    unpush(c.key, c.cost, c.extra)
  end
  no = no + 1
  out[no] = status
  for i = 1, nchecks do
    local v = vs[i] or { 0, 0, 0, 0, 0 }
    out[no + 1], out[no + 2], out[no + 3], out[no + 4], out[no + 5] = v[1], v[2], v[3], v[4], v[5]
    no = no + 5
  end
end
return out
