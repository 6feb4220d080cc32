-- One key's two token buckets (requests and tokens per minute), shared by every proxy replica.
-- Atomic: Redis runs a script alone, so two replicas can never both spend the last token.
-- The clock is Redis's own (TIME), the same for every replica.
--
-- KEYS[1] the requests bucket, KEYS[2] the tokens bucket (a hash each: b = level in milli-units,
--         t = last update in microseconds); both carry the same hash tag, for Redis Cluster.
-- ARGV[1] rpm, ARGV[2] tpm (0: unlimited)
-- ARGV[3] what: "r" take ARGV[4] requests; "t" take ARGV[4] tokens;
--               "R" give ARGV[4] requests back; "T" give ARGV[4] tokens back (negative: charge)
-- ARGV[4] how many
-- ARGV[5] idle expiry in milliseconds
--
-- Returns {allowed (1 or 0), wait in microseconds until the take would pass,
--          requests remaining, microseconds until the requests bucket is full,
--          tokens remaining, microseconds until the tokens bucket is full}
-- (remaining and reset are -1 for an unlimited dimension).

-- Redis 5 and later replicate a script's effects, so it may write after reading TIME; on 3.2 and
-- 4 this asks for it (Redis 7 ignores it).
pcall(function() redis.replicate_commands() end)
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000000 + tonumber(t[2])
local what = ARGV[3]
local n = tonumber(ARGV[4])
local ttl = tonumber(ARGV[5])

-- Level (milli-units) of a bucket of `limit` per minute, refilled up to now.
local function level(key, limit)
  local v = redis.call('HMGET', key, 'b', 't')
  local cap = limit * 1000
  local b = tonumber(v[1])
  local last = tonumber(v[2])
  if b == nil or last == nil then
    return cap
  end
  if now > last then
    b = math.min(cap, b + (now - last) * limit / 60000)
  end
  return b
end

local function store(key, b)
  redis.call('HSET', key, 'b', b, 't', now)
  redis.call('PEXPIRE', key, ttl)
end

local function window(limit, b)
  if limit <= 0 then
    return -1, -1
  end
  local cap = limit * 1000
  local remaining = math.max(0, math.floor(b / 1000))
  local reset = math.ceil((cap - b) * 60000 / limit)
  return remaining, math.max(0, reset)
end

local limits = {tonumber(ARGV[1]), tonumber(ARGV[2])}
local levels = {}
for i = 1, 2 do
  if limits[i] > 0 then
    levels[i] = level(KEYS[i], limits[i])
  else
    levels[i] = 0
  end
end

local allowed = 1
local wait = 0
local i = (what == 'r' or what == 'R') and 1 or 2
if limits[i] > 0 then
  local cap = limits[i] * 1000
  if what == 'r' or what == 't' then
    local need = n * 1000
    if levels[i] >= need then
      levels[i] = levels[i] - need
      store(KEYS[i], levels[i])
    else
      allowed = 0
      wait = math.ceil((need - levels[i]) * 60000 / limits[i])
    end
  else
    levels[i] = math.max(-cap, math.min(cap, levels[i] + n * 1000))
    store(KEYS[i], levels[i])
  end
end

local rr, rreset = window(limits[1], levels[1])
local tr, treset = window(limits[2], levels[2])
return {allowed, wait, rr, rreset, tr, treset}
