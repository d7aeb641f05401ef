-- semaphore_common: what the semaphore scripts share, prepended after
-- record.lua, clock.lua and queue.lua.
--
-- A semaphore is a hash and, while it has several holders, a sorted set
-- under its hash tag:
--   hash key   "permits" -> the capacity (set by the handles that use it)
--              "used"    -> permits held in all (the sum of the counts)
--              "<tok>"   -> the permits owner tok holds
--              "<tok>|m" -> its metadata (relock.WithMetadata), while it
--                           holds permits
--   zset owners  owner token -> server time (ms) at which its permits
--              lapse; an owner's permits count only while this lies in the
--              future, so a crashed holder's permits come back on their own.
-- Both keys live as long as the longest hold (their TTL follows the
-- largest expiry) and go with the last holder, the capacity with them.
-- Permits taken while nobody held or waited (the uncontended case) are
-- "solo": the hash alone, its one holder's permits lapsing with it (its
-- TTL is their lease), as a read/write lock's (see rwlock_common.lua);
-- the scripts that find it solo on their slow path make it shared first
-- (sem_shared). The semaphore's channel is its hash's key.
--
-- Waiters queue in queue.lua's queue, in arrival order; a semaphore's
-- entry carries in its last field (fencing for a lock: semaphores have no
-- fencing) how many permits it asks for. Permits that come back (a
-- release, a waiter that leaves, a holder found lapsed) go to the head of
-- the queue while its request fits, granted with its claim lease and
-- pushed to it; a head that does not fit stops the queue (a waiter for
-- many permits is never overtaken by later waiters for few). Every call
-- does O(log n) work per owner that lapsed or waiter it serves, each
-- once: nothing scans the hash or the queue.

-- sem_solo returns the token of the holder of a hash's fields f (HGETALL),
-- or nil: its first field that is not "permits", "used" or metadata.
local function sem_solo(f)
  for i = 1, #f, 2 do
    local k = f[i]
    if k ~= 'permits' and k ~= 'used' and not string.find(k, '|', 1, true) then return k end
  end
  return nil
end

-- sem_shared makes a solo semaphore (a hash with a TTL and no owners)
-- shared: its holder's expiry, the hash's, goes into owners.
local function sem_shared(key, ok, now)
  local pttl = redis.call('PTTL', key)
  if pttl <= 0 or redis.call('EXISTS', ok) == 1 then return end
  local tok = sem_solo(redis.call('HGETALL', key))
  if tok then
    redis.call('ZADD', ok, now + pttl, tok)
    redis.call('PEXPIRE', ok, pttl)
  end
end

-- sem_fit sets both keys' TTL to the longest live hold, or deletes both
-- when no hold is left (after sem_expire: every expiry left is future).
local function sem_fit(key, ok, now)
  local last = redis.call('ZRANGE', ok, -1, -1, 'WITHSCORES')
  if #last == 0 then
    redis.call('DEL', key, ok)
    return
  end
  local ttl = tonumber(last[2]) - now
  redis.call('PEXPIRE', key, ttl)
  redis.call('PEXPIRE', ok, ttl)
end

-- sem_expire takes back the permits of owners whose expiry has passed.
local function sem_expire(key, ok, now)
  local gone = redis.call('ZRANGEBYSCORE', ok, '-inf', now)
  if #gone == 0 then return end
  local freed = 0
  for _, tok in ipairs(gone) do
    local c = redis.call('HGET', key, tok)
    if c then
      freed = freed + tonumber(c)
      redis.call('HDEL', key, tok, tok .. '|m')
    end
  end
  redis.call('ZREMRANGEBYSCORE', ok, '-inf', now)
  if freed > 0 then redis.call('HINCRBY', key, 'used', -freed) end
  sem_fit(key, ok, now)
end

-- sem_count returns the permits owner tok holds (after sem_expire).
local function sem_count(key, tok)
  return tonumber(redis.call('HGET', key, tok) or 0)
end

-- sem_used returns the permits held in all.
local function sem_used(key)
  return tonumber(redis.call('HGET', key, 'used') or 0)
end

-- sem_set changes owner tok's permits from have to c; at 0 the owner goes.
-- A new owner's metadata, if it gave some, is kept with its permits.
local function sem_set(key, ok, tok, have, c, meta)
  if c == have then return end
  if c == 0 then
    redis.call('HDEL', key, tok, tok .. '|m')
    redis.call('ZREM', ok, tok)
  else
    redis.call('HSET', key, tok, c)
    if have == 0 then set_meta(key, tok, meta) end
  end
  redis.call('HINCRBY', key, 'used', c - have)
end

-- sem_live makes owner tok's permits last at least until (server ms), and
-- both keys at least as long, and records the capacity. A grant calls it
-- before sem_set: it first makes both keys outlive the hold, so that a key
-- about to expire does not take what is written next with it (miniredis's
-- clock runs on during a script, and expires keys; Redis's stands still),
-- then again for a key that its writes created.
local function sem_live(key, ok, tok, cap, untilms, now)
  local ms = untilms - now
  extend(key, ms)
  extend(ok, ms)
  local e = redis.call('ZSCORE', ok, tok)
  if not e or tonumber(e) < untilms then
    redis.call('ZADD', ok, untilms, tok)
  end
  redis.call('HSET', key, 'permits', cap)
  extend(key, ms)
  extend(ok, ms)
end

-- sem_capacity returns the stored capacity, or mine when none is stored
-- (nobody holds permits), and whether it differs from mine.
local function sem_capacity(key, mine)
  local stored = redis.call('HGET', key, 'permits')
  if not stored then return mine, false end
  return tonumber(stored), tonumber(stored) ~= mine
end

-- sem_admit grants the live heads of the queue, in order, while the
-- head's request fits in the free permits; it stops at the first that
-- does not fit, or at entry stop (the caller's own, which it takes by
-- itself). It returns the entry it stopped at, or false (queue empty).
-- The entries of the owners in lost (a set of tokens, or nil), whose
-- permits were just taken back, are dropped instead of granted: a grant
-- would merge with the permits such a waiter believes it still holds,
-- while its next attempt, finding them gone, reports them lost.
local function sem_admit(key, ok, qk, tk, channel, cap, now, stop, lost)
  while true do
    local e = q_head(qk, tk, now)
    if not e or e == stop then return e end
    local tok, wait, claim, n, meta = q_parse(e)
    n = tonumber(n)
    if lost and lost[tok] then
      q_remove(qk, tk, e)
    elseif n > cap - sem_used(key) then
      return e
    else
      q_remove(qk, tk, e)
      local have = sem_count(key, tok)
      sem_live(key, ok, tok, cap, now + claim, now)
      sem_set(key, ok, tok, have, have + n, meta)
      q_push(channel, wait, 0)
    end
  end
end

-- sem_refused returns the ms until the earliest holder lapses (when a
-- refused waiter should try again at the latest). With no holder left
-- (the last one lapsed during this script: miniredis's clock runs on
-- while a script runs, Redis's stands still; a refusal otherwise leaves a
-- holder, see sem_admit) it is 0: try again at once.
local function sem_refused(ok, now)
  local first = redis.call('ZRANGE', ok, 0, 0, 'WITHSCORES')
  if #first == 0 then return 0 end
  return math.max(tonumber(first[2]) - now, 0)
end
