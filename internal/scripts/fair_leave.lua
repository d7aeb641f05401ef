-- fair_leave: a waiter gives up (its ctx ended, or its Client closed) and
-- leaves the queue at once; a grant made to it that it did not take goes
-- to the next waiter, and so does a free lock it was first in line for.
-- (record.lua, clock.lua, queue.lua and fair_common.lua are prepended.)
--
-- KEYS[1] lock hash (the script builds the others, as mutex_acquire.lua)
-- ARGV[1] owner token
-- ARGV[2] the waiter's wait id
-- ARGV[3] hold count the owner has (by its own count)
-- ARGV[4] the waiter's claim lease (ms), as in its queue entry
-- ARGV[5] the waiter's fencing flag, as in its queue entry
-- ARGV[6] the waiter's metadata, as in its queue entry
--
-- Reply: 1.
local lk, tok = KEYS[1], ARGV[1]
q_remove(KEYS[4], KEYS[5], q_entry(tok, ARGV[2], ARGV[4], ARGV[5], ARGV[6]))
if ARGV[3] == '0' and redis.call('HEXISTS', lk, tok) == 1 then
  redis.call('DEL', lk) -- granted to this waiter, never taken
end
if redis.call('EXISTS', lk) == 0 and redis.call('EXISTS', KEYS[4]) == 1 then
  grant_head(lk, KEYS[2], KEYS[4], KEYS[5], lk .. ':w:', server_ms())
end
return 1
