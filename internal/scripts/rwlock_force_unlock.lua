-- rwlock_force_unlock: delete a read/write lock, every hold of every
-- owner (an operator's tool), whatever its holders or only while they are
-- exactly the owners named, and admit its waiters: the longest-waiting
-- writer is granted the lock, or, with no writer waiting, the readers are
-- woken. (record.lua, clock.lua, queue.lua, rwlock_common.lua and
-- force.lua are prepended.)
--
-- KEYS[1..7] as rwlock_acquire.lua, but KEYS[3] is this request's record
--         (see force.lua)
-- ARGV[1] the lock's channel (unused: it is KEYS[1])
-- ARGV[2] record TTL in milliseconds (> 0)
-- ARGV[3...] "*" (whatever the holders), or the tokens of the holders
--         expected: the owners whose read or write holds have not expired
--
-- Reply (see force.lua): 1 deleted, 0 there was no lock to delete, -1
-- held by other owners than those named (nothing changed). A second run
-- of the request answers as the first.
local key, ok, rk, ttl = KEYS[1], KEYS[4], KEYS[3], ARGV[2]
local done = force_replayed(rk)
if done then return done end
local now = server_ms()
rw_shared(key, ok, now)
local want, n = force_owners(3)
if want then
  local holders = {}
  for _, tok in ipairs(redis.call('ZRANGEBYSCORE', ok, now + 1, '+inf')) do
    local r, w = rw_holds(key, tok)
    if r + w > 0 then holders[#holders + 1] = tok end
  end
  local r = force_check(holders, want, n)
  if r then return force_done(rk, r, ttl) end
end
local deleted = redis.call('DEL', key, ok)
rw_handoff(now, true)
if deleted > 0 then return force_done(rk, 1, ttl) end
return force_done(rk, 0, ttl)
