-- semaphore_available: the permits free now, after taking back those of
-- lapsed holders and granting what fits to the waiters at the head of
-- the queue. (record.lua, clock.lua, queue.lua and semaphore_common.lua
-- are prepended.)
--
-- KEYS[1] semaphore hash
-- KEYS[2] owners (sorted set owner -> expiry)
-- KEYS[3] queue of waiters
-- KEYS[4] waiters' deadlines
-- ARGV[1] capacity, as the asking handle was made with
-- ARGV[2] the semaphore's channel
--
-- Reply: the free permits, or error "RELOCK_CAPACITY <c>" when the
-- semaphore is in use with capacity c, not ARGV[1].
local key, ok = KEYS[1], KEYS[2]
local now = server_ms()
sem_shared(key, ok, now)
sem_expire(key, ok, now)
local cap, mismatch = sem_capacity(key, tonumber(ARGV[1]))
if mismatch then
  return redis.error_reply('RELOCK_CAPACITY ' .. cap)
end
sem_admit(key, ok, KEYS[3], KEYS[4], ARGV[2], cap, now, false)
sem_fit(key, ok, now)
return cap - sem_used(key)
