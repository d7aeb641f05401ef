-- rwlock_leave: a writer that gave up waiting leaves the queue; a write
-- grant made to it that it did not take is handed on, and readers that
-- it held back are woken if no other writer waits. (record.lua,
-- clock.lua, queue.lua and rwlock_common.lua are prepended.)
--
-- KEYS[1] lock hash (the script builds the others, as rwlock_acquire.lua)
-- ARGV[1] owner token
-- ARGV[2] the writer's wait id
-- ARGV[3] read holds the owner has (by its own count)
-- ARGV[4] write holds the owner has (by its own count)
-- ARGV[5] the writer's claim lease (ms), as in its queue entry
-- ARGV[6] the writer's fencing flag, as in its queue entry
-- ARGV[7] the writer's metadata, as in its queue entry
--
-- Reply: 1.
local key, ok, tok = KEYS[1], KEYS[4], ARGV[1]
q_remove(KEYS[5], KEYS[6], q_entry(tok, ARGV[2], ARGV[5], ARGV[6], ARGV[7]))
local now = server_ms()
rw_shared(key, ok, now)
rw_expire(key, ok, now)
if ARGV[3] == '0' and ARGV[4] == '0' and redis.call('HEXISTS', key, tok .. ':w') == 1 then
  rw_drop(key, ok, tok) -- granted to this writer, never taken
  rw_fit(key, ok, now)
end
rw_handoff(now, true)
return 1
