-- mutex_leave: a waiter gives up (its ctx ended, or its Client closed) and
-- leaves the queue; a grant made to it that it did not take is handed on.
-- (record.lua, clock.lua, queue.lua and handoff.lua are prepended.)
--
-- KEYS[1] lock key (the script builds the others, as mutex_acquire.lua)
-- ARGV[1] owner token
-- ARGV[2] the waiter's wait id
-- ARGV[3] hold count the owner has (by its own count)
-- ARGV[4] the waiter's claim lease (ms), as in its queue entry
-- ARGV[5] the waiter's fencing flag, as in its queue entry
-- ARGV[6] the waiter's metadata, as in its queue entry
-- ARGV[7] optional: the starvation threshold in ms (see handoff.lua)
--
-- Reply: 1.
local tok = ARGV[1]
q_remove(KEYS[4], KEYS[5], q_entry(tok, ARGV[2], ARGV[4], ARGV[5], ARGV[6]))
local v = redis.call('GET', KEYS[1])
if ARGV[3] == '0' and v and owns(v, tok) then
  redis.call('DEL', KEYS[1])
  handoff(KEYS[1], true, starve_ms(ARGV[7]))
end
return 1
