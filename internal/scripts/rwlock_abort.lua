-- rwlock_abort: undo an acquire whose outcome is unknown (its caller gave
-- up, e.g. ctx ended while the reply was in flight). (record.lua,
-- clock.lua and rwlock_common.lua are prepended.)
--
-- KEYS[1] lock hash (see rwlock_common.lua)
-- KEYS[2] request record of this owner
-- KEYS[3] waiting writers (sorted set)
-- ARGV[1] owner token
-- ARGV[2] request id of the abandoned acquire
-- ARGV[3] record TTL in milliseconds (> 0)
-- ARGV[4] wake-up channel
-- ARGV[5] "r" or "w": the kind of hold the abandoned acquire asked for
-- ARGV[6] read holds the owner had before the abandoned acquire
-- ARGV[7] write holds the owner had before the abandoned acquire
--
-- Reply: 1 if the abandoned acquire had been applied (now undone), else 0.
-- The record marks the request aborted either way, so a late copy of it
-- (a retry on another connection) is refused instead of applied. An
-- abandoned write also withdraws the owner from the waiting writers.
local applied = replayed(KEYS[2], ARGV[2])
remember(KEYS[2], ARGV[2], 'x', ARGV[3])
local key, tok, kind = KEYS[1], ARGV[1], ARGV[5]
if kind == 'w' and redis.call('ZREM', KEYS[3], tok) == 1 then
  redis.call('PUBLISH', ARGV[4], '*')
end
if not applied then
  return 0
end
local beforeR, beforeW = tonumber(ARGV[6]), tonumber(ARGV[7])
if beforeR == 0 and beforeW == 0 then
  redis.call('HDEL', key, tok .. ':r', tok .. ':w', tok .. ':e')
else
  local field = tok .. ':' .. kind
  local before = beforeR
  if kind == 'w' then before = beforeW end
  if before == 0 then
    redis.call('HDEL', key, field)
  elseif redis.call('HEXISTS', key, field) == 1 then
    redis.call('HSET', key, field, before)
  end
end
if not settle(key, server_ms()) or kind == 'w' then
  redis.call('PUBLISH', ARGV[4], '*')
end
return 1
