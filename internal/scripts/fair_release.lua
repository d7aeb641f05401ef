-- fair_release: give back one hold of a fair lock; the final one grants
-- the lock to the head of the queue, and tells it on its own channel.
-- (record.lua, clock.lua, queue.lua and fair_common.lua are prepended.)
--
-- KEYS[1] lock hash (the script builds the others, as mutex_acquire.lua)
-- ARGV[1..4] as reentrant_release.lua
--
-- Reply: 1 released (now, or by an earlier run of the same request),
--        0 this owner holds nothing here (nothing is changed).
local lk, tok = KEYS[1], ARGV[1]
if redis.call('HEXISTS', lk, tok) == 0 then
  -- Not (or no longer) this owner's: a resend of a final release that
  -- ran finds its record.
  if redis.call('EXISTS', lk .. ':r:' .. tok .. ':' .. ARGV[2]) == 1 then return 1 end
  return 0
end
if ARGV[3] ~= '0' then
  -- A partial release sets the owner's count to the one it keeps (not a
  -- decrement): run twice, it changes nothing, so it needs no record.
  redis.call('HSET', lk, tok, ARGV[3])
  redis.call('PEXPIRE', lk, ARGV[4])
  return 1
end
release_record(lk, lk .. ':r:' .. tok .. ':' .. ARGV[2], ARGV[4])
local qk = lk .. ':queue'
if redis.call('EXISTS', qk) == 1 then
  grant_head(lk, lk .. ':fence', qk, lk .. ':timeouts', lk .. ':w:', server_ms())
end
return 1
