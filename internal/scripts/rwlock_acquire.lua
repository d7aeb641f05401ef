-- rwlock_acquire: take or re-enter a read or write hold of a read/write
-- lock (see rwlock_common.lua for the hash). (record.lua,
-- clock.lua and rwlock_common.lua are prepended.)
--
-- KEYS[1] lock hash
-- KEYS[2] fencing counter (touched only for a new write hold when
--         ARGV[6] == "1"; no TTL)
-- KEYS[3] request record of this owner (string "reqid|result", with a TTL)
-- KEYS[4] waiting writers: sorted set of owner tokens, each scored with the
--         server time (ms) until which it counts as waiting; TTL = the
--         latest of those
-- ARGV[1] owner token
-- ARGV[2] lease in milliseconds (> 0)
-- ARGV[3] request id (unique per owner)
-- ARGV[4] read holds this owner believes it has
-- ARGV[5] write holds this owner believes it has
-- ARGV[6] "1" to issue a fencing token on a new write hold, "0" not to
-- ARGV[7] record TTL in milliseconds (> 0)
-- ARGV[8] "r" for a read hold, "w" for a write hold
-- ARGV[9] "1" when the caller waits if refused (a refused writer then
--         registers as waiting), "0" for a single try
-- ARGV[10] how long (ms) a waiting writer's registration lasts unless its
--         next attempt refreshes it
--
-- Reply: {1, fence} acquired (fence: the token of a new write hold with
--                   fencing, else 0),
--        {0, ms}    refused: try again after at most ms, or on a wake-up,
--        {0, -3}    this request was aborted by its sender,
--        {0, -4}    re-entry refused: this owner's earlier holds are gone
--                   (lease lost), so its critical section is unsafe,
--        {0, -5}    write refused: this owner holds only read holds (an
--                   upgrade would deadlock).
--
-- A read is granted when nobody else writes and no live writer waits
-- (writer preference), or at once when the owner already holds a read or
-- the write (re-entry, downgrade). A write is granted when the hash is
-- absent or the owner already writes. Idempotent: a retried request finds
-- its record and answers as the first run did.
local done = replayed(KEYS[3], ARGV[3])
if done == 'x' then return {0, -3} end
if done then return {1, tonumber(done)} end

local key, wq, tok = KEYS[1], KEYS[4], ARGV[1]
local lease = tonumber(ARGV[2])
local haveR, haveW = tonumber(ARGV[4]), tonumber(ARGV[5])
local write = ARGV[8] == 'w'
local now = server_ms()

if haveR == 0 and haveW == 0 and redis.call('HEXISTS', key, tok .. ':e') == 1 then
  -- The owner holds nothing by its own count: these fields are left over
  -- from an acquire whose outcome it never learned and could not undo.
  redis.call('HDEL', key, tok .. ':r', tok .. ':w', tok .. ':e')
  settle(key, now)
end
local r, w = holds(key, tok, now)
if (haveR > 0 and r == 0) or (haveW > 0 and w == 0) then
  return {0, -4}
end
if write and r > 0 and w == 0 then
  return {0, -5}
end

-- grantable returns true, or false and whether the hash (not the waiting
-- writers) is what refuses.
local function grantable()
  local mode = redis.call('HGET', key, 'mode')
  if write then return not mode or w > 0, true end
  if r > 0 or w > 0 then return true end
  if mode == 'write' then return false, true end
  redis.call('ZREMRANGEBYSCORE', wq, '-inf', now)
  return redis.call('EXISTS', wq) == 0, false
end
local ok, byHash = grantable()
if not ok and byHash then
  -- An expired hold may outlive its key's TTL by a millisecond, or linger
  -- while other holds keep the hash alive: drop such holds, decide again.
  settle(key, now)
  ok, byHash = grantable()
end

if not ok then
  if write and ARGV[9] == '1' then
    redis.call('ZREMRANGEBYSCORE', wq, '-inf', now)
    redis.call('ZADD', wq, now + tonumber(ARGV[10]), tok)
    local latest = redis.call('ZRANGE', wq, -1, -1, 'WITHSCORES')
    redis.call('PEXPIRE', wq, tonumber(latest[2]) - now)
  end
  local wait = redis.call('PTTL', key)
  if wait <= 0 then
    local latest = redis.call('ZRANGE', wq, -1, -1, 'WITHSCORES')
    wait = latest[2] and tonumber(latest[2]) - now or 1
  end
  if wait < 1 then wait = 1 end
  return {0, wait}
end

local fence = 0
if write then
  if w == 0 and ARGV[6] == '1' then
    fence = redis.call('INCR', KEYS[2])
  end
  redis.call('HSET', key, 'mode', 'write', tok .. ':w', w + 1, tok .. ':e', now + lease)
  redis.call('ZREM', wq, tok)
else
  redis.call('HSET', key, tok .. ':r', r + 1, tok .. ':e', now + lease)
  redis.call('HSETNX', key, 'mode', 'read')
end
extend(key, lease)
remember(KEYS[3], ARGV[3], fence, ARGV[7])
return {1, fence}
