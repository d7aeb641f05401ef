-- election_force_resign: end the leadership (an operator's tool),
-- whatever its owner or only while the owner named leads; the head of the
-- queue leads next, or the vacancy is logged. (record.lua, clock.lua,
-- queue.lua, election_common.lua and force.lua are prepended.)
--
-- KEYS[1..7] see election_common.lua, but KEYS[3] is this request's
--         record (see force.lua)
-- ARGV[1] prefix of the candidates' own channels
-- ARGV[2] the observers' channel
-- ARGV[3] log TTL in milliseconds (> 0)
-- ARGV[4] record TTL in milliseconds (> 0)
-- ARGV[5...] "*" (whatever the owner), or the token of the owner
--         expected
--
-- Reply (see force.lua): 1 deleted, 0 nobody led (nothing deleted), -1
-- another owner than the one named leads (nothing changed). A second run
-- of the request answers as the first.
local lk, rk, prefix, obs, ttl, rttl = KEYS[1], KEYS[3], ARGV[1], ARGV[2], ARGV[3], ARGV[4]
local done = force_replayed(rk)
if done then return done end
local want, n = force_owners(5)
if want then
  local r = force_check(force_exclusive(lk, false, want, n), want, n)
  if r then return force_done(rk, r, rttl) end
end
local term = redis.call('HGET', lk, 'fence')
local deleted = redis.call('DEL', lk)
local logged = true
if deleted == 1 then
  e_vacate(term, prefix, ttl)
else
  logged = e_ended(ttl)
  local head = e_head()
  if head then
    e_grant(head, prefix, ttl)
    logged = true
  end
end
if logged then e_publish(obs) end
return force_done(rk, deleted, rttl)
