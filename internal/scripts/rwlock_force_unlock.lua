-- rwlock_force_unlock: delete a read/write lock, every hold of every owner
-- (an operator's tool), and admit its waiters: the longest-waiting writer
-- is granted the lock, or, with no writer waiting, the readers are woken.
-- (record.lua, clock.lua, queue.lua and rwlock_common.lua are prepended.)
--
-- KEYS[1..7] as rwlock_acquire.lua (the record key is not used)
-- ARGV[1] the lock's channel
--
-- Reply: 1 if there was a lock to delete, else 0.
local n = redis.call('DEL', KEYS[1], KEYS[4])
rw_handoff(ARGV[1], server_ms(), true)
if n > 0 then return 1 end
return 0
