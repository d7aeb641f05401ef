-- fair_abort: undo an acquire whose outcome is unknown, or that was granted
-- after its caller gave up. (record.lua, clock.lua, queue.lua and
-- fair_common.lua are prepended.)
--
-- KEYS[1] lock hash (the script builds the others, as mutex_acquire.lua)
-- ARGV[1] owner token
-- ARGV[2] request id of the abandoned acquire
-- ARGV[3] record TTL in milliseconds (> 0)
-- ARGV[4] hold count the owner had before the abandoned acquire
--
-- Reply: 1 if the abandoned acquire had been applied (now undone), else 0.
-- The record marks the request aborted either way, so a late copy of it
-- is refused. A blocking caller that gives up also leaves the queue
-- (fair_leave.lua), which passes on a grant it did not take.
local lk, tok = KEYS[1], ARGV[1]
local before = tonumber(ARGV[4])
if before == 0 then
  -- The owner held nothing before: any hold of its own comes from the
  -- abandoned acquire (which writes no record for a new hold), or is a
  -- grant it will not take.
  remember(KEYS[3], ARGV[2], 'x', ARGV[3])
  if redis.call('HEXISTS', lk, tok) == 0 then
    return 0
  end
else
  -- A re-entry: its record says whether it was applied.
  local applied = replayed(KEYS[3], ARGV[2])
  remember(KEYS[3], ARGV[2], 'x', ARGV[3])
  if not applied then
    return 0
  end
  if redis.call('HEXISTS', lk, tok) == 1 then
    redis.call('HSET', lk, tok, ARGV[4])
  end
  return 1
end
redis.call('DEL', lk)
if redis.call('EXISTS', KEYS[4]) == 1 then
  grant_head(lk, KEYS[2], KEYS[4], KEYS[5], lk .. ':w:', server_ms())
end
return 1
