-- mutex_release: release a plain mutex if, and only if, this owner holds it.
--
-- KEYS[1] lock key
-- KEYS[2] request record of this owner
-- ARGV[1] owner token
-- ARGV[2] request id
-- ARGV[3] lease in milliseconds (unused: a mutex has no partial release)
-- ARGV[4] record TTL in milliseconds (> 0)
-- ARGV[5] wake-up channel
-- ARGV[6] "1" on the owner's final hold (always, for a mutex)
--
-- Reply: 1 released (now, or by an earlier run of the same request),
--        0 not held by this owner (nothing is changed).
--
-- This is the hot path of every mutex cycle, so it does not use record.lua:
-- it checks the owner first and reads the record (the bare request id) only
-- when the lock is not this owner's, which is when a resend of a release
-- that already ran must still answer 1.
local tok = ARGV[1]
local v = redis.call('GET', KEYS[1])
if v == tok or (v and string.sub(v, 1, #tok + 1) == tok .. ':') then
  redis.call('DEL', KEYS[1])
  redis.call('SET', KEYS[2], ARGV[2], 'PX', ARGV[4])
  redis.call('PUBLISH', ARGV[5], '1')
  return 1
end
if redis.call('GET', KEYS[2]) == ARGV[2] then
  return 1
end
return 0
