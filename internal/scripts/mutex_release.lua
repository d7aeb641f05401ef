-- mutex_release: release a plain mutex if, and only if, this owner holds it.
-- (record.lua, clock.lua, queue.lua and handoff.lua are prepended.)
--
-- KEYS[1] lock key (the script builds the others, as mutex_acquire.lua)
-- ARGV[1] owner token
-- ARGV[2] request id
-- ARGV[3] optional: the record's TTL in milliseconds; absent or '', this
--         request's record lives as long as the lease had left (see
--         release_record)
-- ARGV[4] optional: the starvation threshold in ms (see handoff.lua)
--
-- Reply: 1 released (now, or by an earlier run of the same request),
--        0 not held by this owner (nothing is changed).
--
-- This is the hot path of every mutex cycle: three calls (the lock, its
-- rename to this request's record, the queue) and two arguments. With
-- nobody queued it publishes nothing, and it calls as few helpers as it
-- can: the queue is checked here, not by calling handoff (and through it
-- starving and starve_ms) to find it missing, which cost this script
-- 2,500 instructions more than the EXISTS alone (callgrind, Redis
-- 7.0.15); a value that is the token alone (no fencing token, no
-- metadata) is told without calling owns.
local lk, tok = KEYS[1], ARGV[1]
local rk = lk .. ':r:' .. tok .. ':' .. ARGV[2]
local v = redis.call('GET', lk)
if v == tok or (v and owns(v, tok)) then
  release_record(lk, rk, ARGV[3])
  if redis.call('EXISTS', lk .. ':queue') == 1 then
    handoff(lk, true, starve_ms(ARGV[4]), true)
  end
  return 1
end
if redis.call('EXISTS', rk) == 1 then
  return 1
end
return 0
