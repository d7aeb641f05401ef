-- latch_set: set a count-down latch's count if none is set. (record.lua
-- is prepended.)
--
-- KEYS[1] latch (string: the count, with a TTL)
-- KEYS[2] request record of this handle (string "reqid|result", with a TTL)
-- ARGV[1] the count (>= 1)
-- ARGV[2] the latch's TTL in milliseconds (> 0)
-- ARGV[3] request id (unique per handle)
-- ARGV[4] record TTL in milliseconds (> 0)
--
-- Reply: 1 if the count was set (now, or by an earlier run of the same
-- request), 0 if a count was set already (nothing is changed).
local done = replayed(KEYS[2], ARGV[3])
if done then return tonumber(done) end
local res = 0
if redis.call('EXISTS', KEYS[1]) == 0 then
  redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[2])
  res = 1
end
remember(KEYS[2], ARGV[3], res, ARGV[4])
return res
