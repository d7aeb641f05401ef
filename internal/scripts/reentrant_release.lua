-- reentrant_release: give back one hold of a reentrant lock.
-- (record.lua, clock.lua, queue.lua and handoff.lua are prepended.)
--
-- KEYS[1] lock hash (the script builds the others, as mutex_acquire.lua)
-- ARGV[1] owner token
-- ARGV[2] request id
-- ARGV[3] the hold count the owner keeps after this release (its own
--         count): 0 for its final hold
-- ARGV[4] a partial release: the lease in milliseconds (> 0), restored;
--         a final release, optional: the record's TTL in milliseconds
--         (absent or '': the record lives as long as the lease had left,
--         see release_record)
--
-- Reply: 1 released (now, or by an earlier run of the same request),
--        0 this owner holds nothing here (nothing is changed).
--
-- The owner's own count decides what "final" means: a hold that Redis
-- counted twice (an acquire whose outcome was never learned) is not left
-- behind after the owner's last Unlock. A final release costs three
-- calls: the owner's field, the rename of the lock to this request's
-- record, the queue.
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
-- The queue checked here, as in mutex_release.lua: the hand-off's helpers
-- are not called when nobody waits.
if redis.call('EXISTS', lk .. ':queue') == 1 then
  handoff(lk, false, STARVE_MS, true)
end
return 1
