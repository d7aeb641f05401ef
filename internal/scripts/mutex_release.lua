-- mutex_release: release a plain mutex if, and only if, this owner holds it.
-- (record.lua is prepended.)
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
if replayed(KEYS[2], ARGV[2]) then
  return 1
end

local tok = ARGV[1]
local v = redis.call('GET', KEYS[1])
if v and owns(v, tok) then
  redis.call('DEL', KEYS[1])
  remember(KEYS[2], ARGV[2], 1, ARGV[4])
  redis.call('PUBLISH', ARGV[5], '1')
  return 1
end
return 0
