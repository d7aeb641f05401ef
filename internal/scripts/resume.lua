-- resume: adopt a hold that this owner has in Redis (a handle made with
-- relock.WithToken resumes a hold of another handle with that token), and
-- renew it if the watchdog is to renew it. (clock.lua is prepended.)
--
-- KEYS[1] the lock's main key (a mutex's string, or a lock's hash)
-- KEYS[2] "w" and "s" only: the owners' expiries (sorted set; absent
--         while the lock is solo, see rwlock_common.lua)
-- ARGV[1] kind: "m" mutex, "h" reentrant or fair, "w" read/write lock,
--         "s" semaphore (as renew.lua)
-- ARGV[2] owner token
-- ARGV[3] lease in milliseconds (> 0)
-- ARGV[4] "1" to renew the hold to at least that lease (it is watched),
--         "0" to leave its lease as it is (a fixed lease)
--
-- Reply: {units, writes, fence, pttl}: the owner's holds (a reentrant
-- lock's count, an rwlock's read holds, a semaphore's permits, 1 for a
-- mutex), its write holds (rwlock; else 0), the fencing token of its hold
-- (0 without), and what is left of the hold's lease in ms after the call;
-- {0, 0, 0, 0} when this owner holds nothing there. It never creates a
-- key and changes nothing of another owner's.
local kind, tok, lease, renew = ARGV[1], ARGV[2], tonumber(ARGV[3]), ARGV[4] == '1'
local key = KEYS[1]
local none = {0, 0, 0, 0}

if kind == 'm' or kind == 'h' then
  local units, fence = 0, 0
  if kind == 'm' then
    local v = redis.call('GET', key)
    local c = v and string.sub(v, #tok + 1, #tok + 1)
    if not v or string.sub(v, 1, #tok) ~= tok or not (c == '' or c == ':' or c == '|') then return none end
    units, fence = 1, tonumber(string.match(v, '^[^:|]*:(%d+)') or 0)
  else
    units = tonumber(redis.call('HGET', key, tok) or 0)
    if units == 0 then return none end
    fence = tonumber(redis.call('HGET', key, 'fence') or 0)
  end
  local pttl = redis.call('PTTL', key)
  if pttl <= 0 then return none end
  if renew and pttl < lease then
    redis.call('PEXPIRE', key, lease)
    pttl = lease
  end
  return {units, 0, fence, pttl}
end

-- "w", "s": the owner's expiry says whether its holds still count; a
-- solo lock's (no owners: see rwlock_common.lua), the hash's TTL.
local owners = KEYS[2]
local e = redis.call('ZSCORE', owners, tok)
local now = server_ms()
local solo = not e and redis.call('EXISTS', owners) == 0
local pttl
if solo then
  pttl = redis.call('PTTL', key)
else
  pttl = tonumber(e or 0) - now
end
if pttl <= 0 then return none end
local units, writes, fence = 0, 0, 0
if kind == 'w' then
  local f = redis.call('HMGET', key, tok .. ':r', tok .. ':w')
  units, writes = tonumber(f[1] or 0), tonumber(f[2] or 0)
  if writes > 0 then fence = tonumber(redis.call('HGET', key, 'fence') or 0) end
else
  units = tonumber(redis.call('HGET', key, tok) or 0)
end
if units + writes == 0 then return none end
if renew and pttl < lease then
  if solo then
    redis.call('PEXPIRE', key, ARGV[3])
  else
    redis.call('ZADD', owners, now + lease, tok)
    for _, k in ipairs({key, owners}) do
      if redis.call('PTTL', k) < lease then redis.call('PEXPIRE', k, ARGV[3]) end
    end
  end
  pttl = lease
end
return {units, writes, fence, pttl}
