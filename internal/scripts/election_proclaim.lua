-- election_proclaim: the leader changes its value. (record.lua,
-- clock.lua, queue.lua and election_common.lua are prepended.)
--
-- KEYS[1..7] see election_common.lua (it uses the leadership and the log)
-- ARGV[1] owner token
-- ARGV[2] the term this owner leads, by its own count
-- ARGV[3] the new value
-- ARGV[4] the observers' channel
-- ARGV[5] log TTL in milliseconds (> 0)
--
-- Reply: 1 changed (logged, observers told); 0 the value was that
-- already (nothing changed, so a resent copy changes nothing); -1 this
-- owner does not lead that term (nothing changed).
local f = redis.call('HMGET', KEYS[1], ARGV[1], 'fence', 'value', 'since', 'fp')
if not f[1] or f[2] ~= ARGV[2] then
  return -1
end
if f[3] == ARGV[3] then
  return 0
end
local rev = redis.call('HINCRBY', KEYS[1], 'rev', 1)
redis.call('HSET', KEYS[1], 'value', ARGV[3])
e_log(ARGV[5], 'P', f[2], rev, f[4], f[5], ARGV[3])
e_publish(ARGV[4])
return 1
