-- rwlock_count: an owner's live hold counts (read-only). (clock.lua is
-- prepended.)
--
-- KEYS[1] lock hash (see rwlock_common.lua)
-- KEYS[2] owners (sorted set owner -> expiry)
-- ARGV[1] owner token
--
-- Reply: {read holds, write holds}; {0, 0} when the owner's expiry has
-- passed, even if its fields are still there.
local tok = ARGV[1]
local e = redis.call('ZSCORE', KEYS[2], tok)
if e then
  if tonumber(e) <= server_ms() then return {0, 0} end
elseif redis.call('EXISTS', KEYS[2]) == 1 then
  return {0, 0}
end
-- A live owner's, or a solo lock's (no owners: its holds live as long as
-- the hash, see rwlock_common.lua).
local f = redis.call('HMGET', KEYS[1], tok .. ':r', tok .. ':w')
return {tonumber(f[1] or 0), tonumber(f[2] or 0)}
