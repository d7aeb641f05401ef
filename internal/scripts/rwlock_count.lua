-- rwlock_count: an owner's live hold counts (read-only). (clock.lua and
-- rwlock_common.lua are prepended.)
--
-- KEYS[1] lock hash (see rwlock_common.lua)
-- ARGV[1] owner token
--
-- Reply: {read holds, write holds}; {0, 0} when the owner's expiry has
-- passed, even if its fields are still there.
local r, w = holds(KEYS[1], ARGV[1], server_ms())
return {r, w}
