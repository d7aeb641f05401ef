-- rwlock_release: give back one read or write hold of a read/write lock.
-- (record.lua, clock.lua, queue.lua and rwlock_common.lua are prepended.)
--
-- KEYS[1] lock hash (the script builds the others, as rwlock_acquire.lua)
-- ARGV[1] owner token
-- ARGV[2] request id
-- ARGV[3] "r" to give back a read hold, "w" a write hold
-- ARGV[4] read holds the owner keeps after this release (its own count)
-- ARGV[5] write holds the owner keeps after this release (its own count)
-- ARGV[6] lease in milliseconds (> 0), restored when the owner keeps holds
-- ARGV[7] record TTL in milliseconds (> 0)
-- ARGV[8] '' to keep a solo lock's final release's record as long as the
--         lease had left, or its TTL in milliseconds (see release_record)
--
-- Reply: 1 released (now, or by an earlier run of the same request),
--        0 this owner has no live hold of that kind (nothing is changed).
--
-- The owner's own counts decide what is final: at 0 its field goes, and
-- when it keeps nothing all of its holds go, so a hold that Redis counted
-- twice (an acquire whose outcome was never learned) is not left behind.
-- Once nobody holds the lock, the longest-waiting writer is granted it;
-- releasing the write lock with no writer waiting wakes the readers.
local key, tok, kind = KEYS[1], ARGV[1], ARGV[3]
if ARGV[4] == '0' and ARGV[5] == '0' and
    redis.call('EXISTS', key .. ':owners', key .. ':queue', key .. ':readers') == 0 and
    redis.call('HEXISTS', key, tok .. ':' .. kind) == 1 then
  -- The last hold of a solo lock's owner, and nobody waits: the lock
  -- goes, renamed to this request's record (three calls, no clock).
  release_record(key, key .. ':r:' .. tok .. ':' .. ARGV[2], ARGV[8])
  return 1
end
-- @keys
if redis.call('EXISTS', KEYS[3]) == 1 then
  return 1 -- this request ran: its record is there
end
local fk, ok, qk, tk = KEYS[2], KEYS[4], KEYS[5], KEYS[6]
local leftR, leftW = tonumber(ARGV[4]), tonumber(ARGV[5])
local now = server_ms()
rw_shared(key, ok, now)
if leftR == 0 and leftW == 0 then
  local owners = redis.call('ZRANGE', ok, 0, 1)
  if #owners == 1 and owners[1] == tok and redis.call('HEXISTS', key, tok .. ':' .. kind) == 1 then
    -- The last hold of the only owner: the lock goes, and the longest
    -- waiting writer gets it, or (a write released) the readers are
    -- woken. (Its expiry is not checked: past it, the lock would be
    -- this owner's all the same, and its handle sends no release after
    -- its local deadline.)
    remember(KEYS[3], ARGV[2], 1, ARGV[7])
    redis.call('DEL', key, ok)
    if redis.call('EXISTS', qk) == 1 then
      rw_handoff(now, kind == 'w')
    elseif kind == 'w' and redis.call('DEL', KEYS[7]) == 1 then
      redis.call('PUBLISH', key, '*')
    end
    return 1
  end
end
rw_expire(key, ok, now)
local r, w = rw_holds(key, tok)
local have, left = r, leftR
if kind == 'w' then have, left = w, leftW end
if have == 0 then
  return 0
end
remember(KEYS[3], ARGV[2], 1, ARGV[7])
local lease = ARGV[6]
local field = tok .. ':' .. kind
if left > 0 then
  -- Set to the count the owner keeps (not a decrement): run twice, after
  -- its record expired, it changes nothing.
  redis.call('HSET', key, field, left)
  redis.call('ZADD', ok, now + lease, tok)
  extend(key, lease)
  extend(ok, lease)
  return 1
end
if leftR == 0 and leftW == 0 then
  rw_drop(key, ok, tok)
else
  redis.call('HDEL', key, field)
  if kind == 'w' then redis.call('HDEL', key, 'writer', 'fence') end
  redis.call('ZADD', ok, now + lease, tok)
end
rw_fit(key, ok, now)
rw_handoff(now, kind == 'w')
return 1
