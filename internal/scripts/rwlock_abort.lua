-- rwlock_abort: undo an acquire whose outcome is unknown (its caller gave
-- up, e.g. ctx ended while the reply was in flight). (record.lua,
-- clock.lua, queue.lua and rwlock_common.lua are prepended.)
--
-- KEYS[1] lock hash (the script builds the others, as rwlock_acquire.lua;
--         KEYS[3] is the abandoned acquire's record)
-- ARGV[1] owner token
-- ARGV[2] request id of the abandoned acquire
-- ARGV[3] record TTL in milliseconds (> 0)
-- ARGV[4] "r" or "w": the kind of hold the abandoned acquire asked for
-- ARGV[5] read holds the owner had before the abandoned acquire
-- ARGV[6] write holds the owner had before the abandoned acquire
--
-- Reply: 1 if the abandoned acquire had been applied (now undone), else 0.
-- The record marks the request aborted either way, so a late copy of it
-- (a retry on another connection) is refused instead of applied. A writer
-- that gives up waiting also leaves the queue (rwlock_leave.lua).
local key, ok, tok, kind = KEYS[1], KEYS[4], ARGV[1], ARGV[4]
local beforeR, beforeW = tonumber(ARGV[5]), tonumber(ARGV[6])
local now = server_ms()
rw_shared(key, ok, now)
-- A new hold writes no record: with nothing held before, any hold of the
-- owner's comes from the abandoned acquire (or is a grant it will not
-- take), and goes.
local applied = (beforeR == 0 and beforeW == 0 and redis.call('ZSCORE', ok, tok)) or replayed(KEYS[3], ARGV[2])
remember(KEYS[3], ARGV[2], 'x', ARGV[3])
if not applied then
  return 0
end
rw_expire(key, ok, now)
if beforeR == 0 and beforeW == 0 then
  rw_drop(key, ok, tok)
else
  local field = tok .. ':' .. kind
  local before = beforeR
  if kind == 'w' then before = beforeW end
  if before == 0 then
    redis.call('HDEL', key, field)
    if kind == 'w' then redis.call('HDEL', key, 'writer', 'fence') end
  elseif redis.call('HEXISTS', key, field) == 1 then
    redis.call('HSET', key, field, before)
  end
end
rw_fit(key, ok, now)
rw_handoff(now, kind == 'w')
return 1
