-- reentrant_abort: undo an acquire whose outcome is unknown (its caller gave
-- up, e.g. ctx ended while the reply was in flight). (record.lua,
-- clock.lua, queue.lua and handoff.lua are prepended.)
--
-- KEYS[1] lock hash (the script builds the others, as mutex_acquire.lua;
--         KEYS[3] is the abandoned acquire's record)
-- ARGV[1] owner token
-- ARGV[2] request id of the abandoned acquire
-- ARGV[3] record TTL in milliseconds (> 0)
-- ARGV[4] hold count the owner had before the abandoned acquire
--
-- Reply: 1 if the abandoned acquire had been applied (now undone), else 0.
-- The record marks the request aborted either way, so a late copy of it
-- (a retry on another connection) is refused instead of applied.
local tok = ARGV[1]
local before = tonumber(ARGV[4])
if before == 0 then
  -- The owner held nothing before: any hold of its own comes from the
  -- abandoned acquire (which writes no record for a new hold), or is a
  -- grant it will not take.
  remember(KEYS[3], ARGV[2], 'x', ARGV[3])
  if redis.call('HEXISTS', KEYS[1], tok) == 0 then
    return 0
  end
  redis.call('DEL', KEYS[1])
  handoff(KEYS[1], false, STARVE_MS)
  return 1
end
-- A re-entry: its record says whether it was applied.
local applied = replayed(KEYS[3], ARGV[2])
remember(KEYS[3], ARGV[2], 'x', ARGV[3])
if not applied then
  return 0
end
if redis.call('HEXISTS', KEYS[1], tok) == 1 then
  redis.call('HSET', KEYS[1], tok, ARGV[4])
end
return 1
