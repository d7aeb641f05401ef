-- fair_force_unlock: delete a fair lock whatever its owner (an operator's
-- tool) and grant it to the head of its queue.
-- (record.lua, clock.lua, queue.lua and fair_common.lua are prepended.)
--
-- KEYS[1..5] as fair_acquire.lua (the record key is not used)
-- ARGV[1] prefix of the waiters' own wake-up channels
--
-- Reply: 1 if there was a lock to delete, else 0.
local n = redis.call('DEL', KEYS[1])
grant_head(KEYS[1], KEYS[2], KEYS[4], KEYS[5], ARGV[1], server_ms())
return n
