-- latch_count_down: count a count-down latch down by one; at zero the
-- latch is deleted and every waiter is woken. (record.lua is prepended.)
--
-- KEYS[1] latch (string: the count, with a TTL)
-- KEYS[2] request record of this handle (string "reqid|result", with a TTL)
-- ARGV[1] request id (unique per handle)
-- ARGV[2] record TTL in milliseconds (> 0)
-- ARGV[3] the latch's TTL in milliseconds (> 0), restored while the count
--         stays above zero
-- ARGV[4] the latch's channel
--
-- Reply: the count after this request (now, or as an earlier run of the
-- same request left it): 0 when it reached zero, or when no count was set
-- (the latch stays at zero: nothing is created).
local done = replayed(KEYS[2], ARGV[1])
if done then return tonumber(done) end
local res = 0
if redis.call('EXISTS', KEYS[1]) == 1 then
  res = redis.call('DECR', KEYS[1])
  if res <= 0 then
    res = 0
    redis.call('DEL', KEYS[1])
    redis.call('PUBLISH', ARGV[4], '*')
  else
    redis.call('PEXPIRE', KEYS[1], ARGV[3])
  end
end
remember(KEYS[2], ARGV[1], res, ARGV[2])
return res
