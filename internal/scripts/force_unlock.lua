-- force_unlock: delete a mutex or a reentrant lock (an operator's tool),
-- whatever its owner or only while the owner named holds it, and wake
-- every waiter. (force.lua is prepended.)
--
-- KEYS[1] lock key: a mutex's string or a reentrant lock's hash
-- KEYS[2] this request's record (see force.lua)
-- ARGV[1] wake-up channel
-- ARGV[2] "m" for a mutex, "h" for a reentrant lock
-- ARGV[3] record TTL in milliseconds (> 0)
-- ARGV[4...] "*" (whatever the owner), or the token of the owner
--         expected
--
-- Reply (see force.lua): 1 deleted, 0 there was no lock to delete, -1
-- held by another owner than the one named (nothing changed). A second
-- run of the request answers as the first.
local key, rk, ttl = KEYS[1], KEYS[2], ARGV[3]
local done = force_replayed(rk)
if done then return done end
local want, n = force_owners(4)
if want then
  local r = force_check(force_exclusive(key, ARGV[2] == 'm', want, n), want, n)
  if r then return force_done(rk, r, ttl) end
end
if redis.call('DEL', key) == 1 then
  redis.call('PUBLISH', ARGV[1], '*')
  return force_done(rk, 1, ttl)
end
return force_done(rk, 0, ttl)
