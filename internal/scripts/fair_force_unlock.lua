-- fair_force_unlock: delete a fair lock whatever its owner (an operator's
-- tool) and wake the head of its queue, whose next attempt then succeeds.
-- (clock.lua and fair_common.lua are prepended.)
--
-- KEYS[1] lock hash
-- KEYS[2] queue
-- KEYS[3] waiter deadlines
-- ARGV[1] prefix of the waiters' own wake-up channels
--
-- Reply: 1 if there was a lock to delete, else 0.
local n = redis.call('DEL', KEYS[1])
wake_head(KEYS[2], KEYS[3], ARGV[1])
return n
