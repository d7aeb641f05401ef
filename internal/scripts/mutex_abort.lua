-- mutex_abort: undo an acquire whose outcome is unknown (its caller gave up,
-- e.g. ctx ended while the reply was in flight). (record.lua, clock.lua,
-- queue.lua and handoff.lua are prepended.)
--
-- KEYS[1] lock key (the script builds the others, as mutex_acquire.lua;
--         KEYS[3] is the abandoned acquire's record)
-- ARGV[1] owner token
-- ARGV[2] request id of the abandoned acquire
-- ARGV[3] record TTL in milliseconds (> 0)
-- ARGV[4] hold count the owner had before (always 0: not reentrant)
-- ARGV[5] optional: the starvation threshold in ms (see handoff.lua)
--
-- Reply: 1 if the abandoned acquire had taken the lock (now released), else 0.
-- Either way the record marks the request aborted, so a copy of it that
-- reaches Redis later (a retry on another connection) does not take the
-- lock; but a native SET NX (a first attempt without fencing) cannot read
-- the record: a late copy of one takes the lock for its lease, unrenewed,
-- unless the owner's next acquire finds it and takes it as its own.
-- The caller held nothing before the acquire (a mutex is not reentrant), so
-- any hold of this owner comes from the abandoned request (or is a grant it
-- will not take).
remember(KEYS[3], ARGV[2], 'x', ARGV[3])
local v = redis.call('GET', KEYS[1])
if v and owns(v, ARGV[1]) then
  redis.call('DEL', KEYS[1])
  handoff(KEYS[1], true, starve_ms(ARGV[5]))
  return 1
end
return 0
