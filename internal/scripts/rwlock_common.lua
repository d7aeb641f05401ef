-- rwlock_common: what the read/write-lock scripts share, prepended after
-- record.lua, clock.lua and queue.lua.
--
-- The lock is a hash and, while it has several owners, a sorted set under
-- its hash tag:
--   hash key   "writer"   -> the token of the owner holding the write lock
--                            (only while one does)
--              "<tok>:r"  -> that owner's read hold count
--              "<tok>:w"  -> that owner's write hold count
--              "fence"    -> the fencing token of the current write hold
--              "<tok>|m"  -> that owner's metadata (relock.WithMetadata),
--                            while it holds anything
--   zset owners  owner token -> server time (ms) at which its holds expire;
--              an owner's holds count only while this lies in the future,
--              so a crashed reader's share expires on its own.
-- Both keys live as long as the longest hold (their TTL follows the
-- largest expiry) and go with the last hold. A lock taken while free and
-- unwaited (the uncontended case) is "solo": the hash alone, its one
-- owner's holds expiring with it (its TTL is their lease), so that a
-- cycle costs no sorted set and no clock. The scripts that find it solo
-- on their slow path make it shared first (rw_shared); queries read
-- either. The queue (queue.lua) holds
-- the waiting writers, served in arrival order. Every call does O(log n)
-- work in the number n of owners: expired owners are found by score, the
-- longest hold by rank, and each expired owner is dropped once.

-- rw_solo returns the token of the owner of a hash's fields f (HGETALL),
-- or nil: the token of its first "<tok>:r" or "<tok>:w" field (a solo
-- lock has one owner).
local function rw_solo(f)
  for i = 1, #f, 2 do
    local tok = string.match(f[i], '^([^:|]*):[rw]$')
    if tok then return tok end
  end
  return nil
end

-- rw_shared makes a solo lock (a hash with a TTL and no owners) shared:
-- its owner's expiry, the hash's, goes into owners, where the slow paths
-- of the scripts below look for it.
local function rw_shared(key, ok, now)
  local pttl = redis.call('PTTL', key)
  if pttl <= 0 or redis.call('EXISTS', ok) == 1 then return end
  local tok = rw_solo(redis.call('HGETALL', key))
  if tok then
    redis.call('ZADD', ok, now + pttl, tok)
    redis.call('PEXPIRE', ok, pttl)
  end
end

-- rw_expire drops the holds of owners whose expiry has passed.
local function rw_expire(key, ok, now)
  local gone = redis.call('ZRANGEBYSCORE', ok, '-inf', now)
  if #gone == 0 then return end
  local writer = redis.call('HGET', key, 'writer')
  for _, tok in ipairs(gone) do
    redis.call('HDEL', key, tok .. ':r', tok .. ':w', tok .. '|m')
    if tok == writer then redis.call('HDEL', key, 'writer', 'fence') end
  end
  redis.call('ZREMRANGEBYSCORE', ok, '-inf', now)
end

-- rw_fit sets both keys' TTL to the longest live hold, or deletes both
-- when no hold is left; it returns whether holds are left.
local function rw_fit(key, ok, now)
  local last = redis.call('ZRANGE', ok, -1, -1, 'WITHSCORES')
  if #last == 0 then
    redis.call('DEL', key, ok)
    return false
  end
  local ttl = tonumber(last[2]) - now
  redis.call('PEXPIRE', key, ttl)
  redis.call('PEXPIRE', ok, ttl)
  return true
end

-- rw_holds returns owner tok's read and write counts (after rw_expire:
-- only live holds are left).
local function rw_holds(key, tok)
  local f = redis.call('HMGET', key, tok .. ':r', tok .. ':w')
  return tonumber(f[1] or 0), tonumber(f[2] or 0)
end

-- rw_drop removes every hold of owner tok.
local function rw_drop(key, ok, tok)
  redis.call('HDEL', key, tok .. ':r', tok .. ':w', tok .. '|m')
  redis.call('ZREM', ok, tok)
  if redis.call('HGET', key, 'writer') == tok then
    redis.call('HDEL', key, 'writer', 'fence')
  end
end

-- Every read/write-lock script that changes the lock takes these KEYS
-- (the hot ones build KEYS[2...] from KEYS[1]: see scripts.deriving):
-- 1 lock hash, 2 fencing counter, 3 request record of the caller, 4 owners,
-- 5 queue of waiting writers, 6 their deadlines, 7 the readers-waiting
-- marker (a string with a TTL, set by a blocking read that was refused).
-- The lock's channel is its hash's key.

-- rw_handoff admits whom the lock can admit now (after rw_shared): with
-- no hold left, the longest-waiting live writer is granted the write lock
-- (with its claim lease) and told on the lock's channel; otherwise, if
-- wake_readers, no writer waits and some reader does (the marker), the
-- readers are woken. Nobody else is woken, and with nobody waiting nothing
-- is published.
local function rw_handoff(now, wake_readers)
  local key, fk, ok, qk, tk, rk = KEYS[1], KEYS[2], KEYS[4], KEYS[5], KEYS[6], KEYS[7]
  local channel = key
  local free = redis.call('EXISTS', ok) == 0
  if free then
    local tok, wait, claim, fencing, meta = q_grant(qk, tk, now)
    if tok then
      local fence = 0
      if fencing == '1' then
        fence = redis.call('INCR', fk)
        redis.call('HSET', key, 'fence', fence)
      end
      redis.call('HSET', key, 'writer', tok, tok .. ':w', '1')
      set_meta(key, tok, meta)
      redis.call('ZADD', ok, now + claim, tok)
      redis.call('PEXPIRE', key, claim)
      redis.call('PEXPIRE', ok, claim)
      q_push(channel, wait, fence)
      return
    end
  end
  if wake_readers and not q_head(qk, tk, now) and redis.call('DEL', rk) == 1 then
    redis.call('PUBLISH', channel, '*')
  end
end
