-- fair_abort: undo an acquire whose outcome is unknown, or that was granted
-- after its caller gave up, and take the caller out of the queue.
-- (record.lua, clock.lua and fair_common.lua are prepended.)
--
-- KEYS[1] lock hash
-- KEYS[2] request record of this owner
-- KEYS[3] queue
-- KEYS[4] waiter deadlines
-- ARGV[1] owner token
-- ARGV[2] request id of the abandoned acquire
-- ARGV[3] record TTL in milliseconds (> 0)
-- ARGV[4] lock channel (unused)
-- ARGV[5] hold count the owner had before the abandoned acquire
-- ARGV[6] prefix of the waiters' own wake-up channels
--
-- Reply: 1 if the abandoned acquire had been applied (now undone), else 0.
local lk, qk, zk, tok = KEYS[1], KEYS[3], KEYS[4], ARGV[1]
local applied = replayed(KEYS[2], ARGV[2])
remember(KEYS[2], ARGV[2], 'x', ARGV[3])
leave_queue(lk, qk, zk, tok, ARGV[6])
if not applied then
  return 0
end
local before = tonumber(ARGV[5])
if redis.call('HEXISTS', lk, tok) == 0 then
  return 1
end
if before > 0 then
  redis.call('HSET', lk, tok, before)
  return 1
end
redis.call('DEL', lk)
wake_head(qk, zk, ARGV[6])
return 1
