-- mutex_abort: undo an acquire whose outcome is unknown (its caller gave up,
-- e.g. ctx ended while the reply was in flight). (record.lua is prepended.)
--
-- KEYS[1] lock key
-- KEYS[2] request record of this owner
-- ARGV[1] owner token
-- ARGV[2] request id of the abandoned acquire
-- ARGV[3] record TTL in milliseconds (> 0)
-- ARGV[4] wake-up channel
-- ARGV[5] hold count the owner had before (always 0: not reentrant)
--
-- Reply: 1 if the abandoned acquire had taken the lock (now released), else 0.
-- Either way the record marks the request aborted, so a copy of it that
-- reaches Redis later (a retry on another connection) does not take the lock.
-- The caller held nothing before the acquire (a mutex is not reentrant), so
-- any hold of this owner comes from the abandoned request.
remember(KEYS[2], ARGV[2], 'x', ARGV[3])
local tok = ARGV[1]
local v = redis.call('GET', KEYS[1])
if v and owns(v, tok) then
  redis.call('DEL', KEYS[1])
  redis.call('PUBLISH', ARGV[4], '1')
  return 1
end
return 0
