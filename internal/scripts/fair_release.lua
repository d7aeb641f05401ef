-- fair_release: give back one hold of a fair lock; the final one grants
-- the lock to the head of the queue, and tells it on its own channel.
-- (record.lua, clock.lua, queue.lua and fair_common.lua are prepended.)
--
-- KEYS[1..5] as fair_acquire.lua: lock hash, fencing counter, request
--            record, queue, waiter deadlines
-- ARGV[1] owner token
-- ARGV[2] request id
-- ARGV[3] lease in milliseconds (> 0), restored on a partial release
-- ARGV[4] record TTL in milliseconds (> 0)
-- ARGV[5] prefix of the waiters' own wake-up channels
-- ARGV[6] the hold count the owner keeps after this release (its own
--         count): 0 for its final hold
--
-- Reply: 1 released (now, or by an earlier run of the same request),
--        0 this owner holds nothing here (nothing is changed).
local tok = ARGV[1]
if redis.call('HEXISTS', KEYS[1], tok) == 0 then
  -- Not (or no longer) this owner's: a resend of a final release that
  -- ran answers from its record.
  if replayed(KEYS[3], ARGV[2]) then return 1 end
  return 0
end
if ARGV[6] ~= '0' then
  -- A partial release sets the owner's count to the one it keeps (not a
  -- decrement): run twice, it changes nothing, so it needs no record.
  redis.call('HSET', KEYS[1], tok, ARGV[6])
  redis.call('PEXPIRE', KEYS[1], ARGV[3])
  return 1
end
remember(KEYS[3], ARGV[2], 1, ARGV[4])
redis.call('DEL', KEYS[1])
if redis.call('EXISTS', KEYS[4]) == 1 then
  grant_head(KEYS[1], KEYS[2], KEYS[4], KEYS[5], ARGV[5], server_ms())
end
return 1
