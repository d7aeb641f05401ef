-- semaphore_force_release: take back every permit of every holder (an
-- operator's tool) and grant them to the waiters at the head of the
-- queue. (record.lua, clock.lua, queue.lua and semaphore_common.lua are
-- prepended.)
--
-- KEYS[1..4] as semaphore_available.lua
-- ARGV[1] capacity, as the asking handle was made with
-- ARGV[2] the semaphore's channel
--
-- Reply: 1 if any permit was held, else 0; or error "RELOCK_CAPACITY
-- <c>" when the semaphore is in use with capacity c, not ARGV[1]
-- (nothing is changed).
local key, ok = KEYS[1], KEYS[2]
local _, mismatch = sem_capacity(key, tonumber(ARGV[1]))
if mismatch then
  return redis.error_reply('RELOCK_CAPACITY ' .. redis.call('HGET', key, 'permits'))
end
local n = redis.call('DEL', key, ok)
local now = server_ms()
sem_admit(key, ok, KEYS[3], KEYS[4], ARGV[2], tonumber(ARGV[1]), now, false)
sem_fit(key, ok, now)
if n > 0 then return 1 end
return 0
