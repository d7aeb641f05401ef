-- fair_force_unlock: delete a fair lock (an operator's tool), whatever
-- its owner or only while the owner named holds it, and grant it to the
-- head of its queue. (record.lua, clock.lua, queue.lua, fair_common.lua
-- and force.lua are prepended.)
--
-- KEYS[1..5] as fair_acquire.lua, but KEYS[3] is this request's record
--         (see force.lua)
-- ARGV[1] prefix of the waiters' own wake-up channels
-- ARGV[2] record TTL in milliseconds (> 0)
-- ARGV[3...] "*" (whatever the owner), or the token of the owner
--         expected
--
-- Reply (see force.lua): 1 deleted, 0 there was no lock to delete, -1
-- held by another owner than the one named (nothing changed). A second
-- run of the request answers as the first.
local key, rk, ttl = KEYS[1], KEYS[3], ARGV[2]
local done = force_replayed(rk)
if done then return done end
local want, n = force_owners(3)
if want then
  local r = force_check(force_exclusive(key, false, want, n), want, n)
  if r then return force_done(rk, r, ttl) end
end
local deleted = redis.call('DEL', key)
grant_head(key, KEYS[2], KEYS[4], KEYS[5], ARGV[1], server_ms())
return force_done(rk, deleted, ttl)
