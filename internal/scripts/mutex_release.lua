-- mutex_release: release a plain mutex if, and only if, this owner holds it.
-- (record.lua, clock.lua, queue.lua and handoff.lua are prepended.)
--
-- KEYS[1..5] as mutex_acquire.lua: lock, fencing counter, request record,
--            queue, waiter deadlines
-- ARGV[1] owner token
-- ARGV[2] request id
-- ARGV[3] lease in milliseconds (unused: a mutex has no partial release)
-- ARGV[4] record TTL in milliseconds (> 0)
-- ARGV[5] the lock's channel
-- ARGV[6] the hold count the owner keeps (always 0, for a mutex)
-- ARGV[7] starvation threshold in milliseconds (see handoff.lua)
--
-- Reply: 1 released (now, or by an earlier run of the same request),
--        0 not held by this owner (nothing is changed).
--
-- This is the hot path of every mutex cycle: it checks the owner first and
-- reads the record (the bare request id) only when the lock is not this
-- owner's, which is when a resend of a release that already ran must still
-- answer 1. With nobody queued it publishes nothing.
local tok = ARGV[1]
local v = redis.call('GET', KEYS[1])
if v and owns(v, tok) then
  redis.call('DEL', KEYS[1])
  redis.call('SET', KEYS[3], ARGV[2], 'PX', ARGV[4])
  handoff(KEYS[1], KEYS[2], KEYS[4], KEYS[5], ARGV[5], ARGV[7], true)
  return 1
end
if redis.call('GET', KEYS[3]) == ARGV[2] then
  return 1
end
return 0
