-- rwlock_release: give back one read or write hold of a read/write lock.
-- (record.lua, clock.lua and rwlock_common.lua are prepended.)
--
-- KEYS[1] lock hash (see rwlock_common.lua)
-- KEYS[2] request record of this owner
-- ARGV[1] owner token
-- ARGV[2] request id
-- ARGV[3] lease in milliseconds (> 0), restored when the owner keeps holds
-- ARGV[4] record TTL in milliseconds (> 0)
-- ARGV[5] wake-up channel
-- ARGV[6] "r" to give back a read hold, "w" a write hold
-- ARGV[7] read holds the owner keeps after this release (its own count)
-- ARGV[8] write holds the owner keeps after this release (its own count)
--
-- Reply: 1 released (now, or by an earlier run of the same request),
--        0 this owner has no live hold of that kind (nothing is changed).
--
-- The owner's own counts decide what is final: at 0 its field goes, and
-- when it keeps nothing all of its fields go, so a hold that Redis counted
-- twice (an acquire whose outcome was never learned) is not left behind.
-- Releasing a write wakes every waiter (readers may join a downgraded
-- holder); a release that frees the lock wakes every waiter too (a writer
-- waiting for the last reader). The TTL shrinks to the longest hold left.
if replayed(KEYS[2], ARGV[2]) then
  return 1
end

local key, tok, kind = KEYS[1], ARGV[1], ARGV[6]
local leftR, leftW = tonumber(ARGV[7]), tonumber(ARGV[8])
local now = server_ms()
local r, w = holds(key, tok, now)
local have, left = r, leftR
if kind == 'w' then have, left = w, leftW end
if have == 0 then
  return 0
end
remember(KEYS[2], ARGV[2], 1, ARGV[4])
local lease = tonumber(ARGV[3])
local field = tok .. ':' .. kind
if left > 0 and redis.call('HINCRBY', key, field, -1) > 0 then
  redis.call('HSET', key, tok .. ':e', now + lease)
  extend(key, lease)
  return 1
end
if leftR == 0 and leftW == 0 then
  redis.call('HDEL', key, tok .. ':r', tok .. ':w', tok .. ':e')
else
  redis.call('HDEL', key, field)
  redis.call('HSET', key, tok .. ':e', now + lease)
end
if not settle(key, now) or kind == 'w' then
  redis.call('PUBLISH', ARGV[5], '*')
end
return 1
