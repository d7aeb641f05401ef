-- semaphore_force_release: take back every permit of every holder (an
-- operator's tool), whatever the holders or only while they are exactly
-- the owners named, and grant them to the waiters at the head of the
-- queue. (record.lua, clock.lua, queue.lua, semaphore_common.lua and
-- force.lua are prepended.)
--
-- KEYS[1..5] as semaphore_acquire.lua, but KEYS[2] is this request's
--         record (see force.lua)
-- ARGV[1] capacity, as the asking handle was made with
-- ARGV[2] the semaphore's channel
-- ARGV[3] record TTL in milliseconds (> 0)
-- ARGV[4...] "*" (whatever the holders), or the tokens of the holders
--         expected: the owners whose permits have not lapsed
--
-- Reply (see force.lua): 1 permits were held (all taken back), 0 none
-- was, -1 held by other owners than those named (nothing changed); or
-- error "RELOCK_CAPACITY <c>" when the semaphore is in use with capacity
-- c, not ARGV[1] (nothing is changed). A second run of the request
-- answers as the first.
--
-- A former holder that is also waiting for more permits is not granted
-- them: its queue entries are dropped, so that its next attempt finds its
-- permits gone and reports them lost (a grant would merge with the count
-- it believes it still holds, and it would never learn of the loss).
local key, rk, ok, ttl = KEYS[1], KEYS[2], KEYS[3], ARGV[3]
local done = force_replayed(rk)
if done then return done end
local cap, mismatch = sem_capacity(key, tonumber(ARGV[1]))
if mismatch then
  return force_refuse(rk, 'RELOCK_CAPACITY ' .. cap, ttl)
end
local now = server_ms()
sem_shared(key, ok, now)
local want, n = force_owners(4)
if want then
  local holders = {}
  for _, tok in ipairs(redis.call('ZRANGEBYSCORE', ok, now + 1, '+inf')) do
    if sem_count(key, tok) > 0 then holders[#holders + 1] = tok end
  end
  local r = force_check(holders, want, n)
  if r then return force_done(rk, r, ttl) end
end
local former = {}
for _, tok in ipairs(redis.call('ZRANGE', ok, 0, -1)) do
  former[tok] = true
end
local deleted = redis.call('DEL', key, ok)
-- Every queue entry of a former holder goes, not only those sem_admit
-- meets before a waiter that does not fit: a later release would grant
-- one behind it. The whole queue, once: an operator's call.
for _, e in ipairs(redis.call('ZRANGE', KEYS[4], 0, -1)) do
  if former[q_parse(e)] then q_remove(KEYS[4], KEYS[5], e) end
end
sem_admit(key, ok, KEYS[4], KEYS[5], ARGV[2], cap, now, false, former)
sem_fit(key, ok, now)
if deleted > 0 then return force_done(rk, 1, ttl) end
return force_done(rk, 0, ttl)
