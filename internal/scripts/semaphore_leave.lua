-- semaphore_leave: a waiter that gave up (its ctx ended, or its Client
-- closed) leaves the queue at once; permits granted to it that it did not
-- take are given back, and the waiters behind it that now fit are
-- granted. (record.lua, clock.lua, queue.lua and semaphore_common.lua are
-- prepended.)
--
-- KEYS[1] semaphore hash (the script builds the others, as
--         semaphore_acquire.lua)
-- ARGV[1] owner token
-- ARGV[2] the waiter's wait id
-- ARGV[3] permits the owner holds (by its own count)
-- ARGV[4] the waiter's claim lease (ms), as in its queue entry
-- ARGV[5] the permits it asked for, as in its queue entry
-- ARGV[6] capacity, as this handle was made with (used only when none
--         is stored)
-- ARGV[7] the waiter's metadata, as in its queue entry
--
-- Reply: 1.
local key, ok, qk, tk, tok = KEYS[1], KEYS[3], KEYS[4], KEYS[5], ARGV[1]
q_remove(qk, tk, q_entry(tok, ARGV[2], ARGV[4], ARGV[5], ARGV[7]))
local now = server_ms()
sem_shared(key, ok, now)
sem_expire(key, ok, now)
local have = tonumber(ARGV[3])
local c = sem_count(key, tok)
if c > have then
  sem_set(key, ok, tok, c, have) -- granted to this waiter, never taken
end
local cap = sem_capacity(key, tonumber(ARGV[6]))
sem_admit(key, ok, qk, tk, key, cap, now, false)
sem_fit(key, ok, now)
return 1
