-- election_resign: the leader gives up its leadership; the head of the
-- queue leads next (told on its own channel), or the vacancy is logged.
-- (record.lua, clock.lua, queue.lua and election_common.lua are
-- prepended.)
--
-- KEYS[1..7] see election_common.lua
-- ARGV[1] owner token
-- ARGV[2] request id
-- ARGV[3] record TTL in milliseconds (> 0)
-- ARGV[4] prefix of the candidates' own channels
-- ARGV[5] the observers' channel
-- ARGV[6] log TTL in milliseconds (> 0)
--
-- Reply: 1 resigned (now, or by an earlier run of the same request), 0
-- this owner does not lead (nothing is changed).
if replayed(KEYS[3], ARGV[2]) then
  return 1
end
if redis.call('HEXISTS', KEYS[1], ARGV[1]) == 0 then
  return 0
end
remember(KEYS[3], ARGV[2], 1, ARGV[3])
local term = redis.call('HGET', KEYS[1], 'fence')
redis.call('DEL', KEYS[1])
e_vacate(term, ARGV[4], ARGV[6])
e_publish(ARGV[5])
return 1
