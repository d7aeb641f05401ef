-- reentrant_leave: a waiter gives up (its ctx ended, or its Client closed)
-- and leaves the queue; a grant made to it that it did not take is handed
-- on. (record.lua, clock.lua, queue.lua and handoff.lua are prepended.)
--
-- KEYS[1] lock hash (the script builds the others, as mutex_acquire.lua)
-- ARGV[1..6] as mutex_leave.lua
--
-- Reply: 1.
local tok = ARGV[1]
q_remove(KEYS[4], KEYS[5], q_entry(tok, ARGV[2], ARGV[4], ARGV[5], ARGV[6]))
if ARGV[3] == '0' and redis.call('HEXISTS', KEYS[1], tok) == 1 then
  redis.call('DEL', KEYS[1])
  handoff(KEYS[1], false, STARVE_MS)
end
return 1
