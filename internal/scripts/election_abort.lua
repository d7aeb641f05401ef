-- election_abort: undo a campaign attempt whose outcome is unknown, or
-- that was made leader after its caller gave up. (record.lua, clock.lua,
-- queue.lua and election_common.lua are prepended.)
--
-- KEYS[1..7] see election_common.lua
-- ARGV[1] owner token
-- ARGV[2] request id of the abandoned attempt
-- ARGV[3] record TTL in milliseconds (> 0)
-- ARGV[4] prefix of the candidates' own channels
-- ARGV[5] the observers' channel
-- ARGV[6] log TTL in milliseconds (> 0)
-- ARGV[7] optional: "1" to end this owner's leadership whatever the
--         request (the give-back of a leadership its handle has declared
--         lost, see core.Request.GiveBack)
--
-- Reply: 1 if the abandoned attempt had made the caller leader (that
-- leadership is ended now: the next candidate leads, or the vacancy is
-- logged), else 0. The record marks the request aborted either way, so a
-- late copy of it is refused. The caller also leaves the queue
-- (election_leave.lua).
local applied = ARGV[7] == '1' or replayed(KEYS[3], ARGV[2])
remember(KEYS[3], ARGV[2], 'x', ARGV[3])
if not applied then
  return 0
end
if redis.call('HEXISTS', KEYS[1], ARGV[1]) == 0 then
  return 1
end
local term = redis.call('HGET', KEYS[1], 'fence')
redis.call('DEL', KEYS[1])
e_vacate(term, ARGV[4], ARGV[6])
e_publish(ARGV[5])
return 1
