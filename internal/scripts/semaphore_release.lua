-- semaphore_release: give back n permits of a semaphore; what comes back
-- goes to the head(s) of the queue. (record.lua, clock.lua, queue.lua and
-- semaphore_common.lua are prepended.)
--
-- KEYS[1] semaphore hash (the script builds the others, as
--         semaphore_acquire.lua)
-- ARGV[1] owner token
-- ARGV[2] request id
-- ARGV[3] n, the permits given back
-- ARGV[4] permits the owner keeps after this release (its own count)
-- ARGV[5] capacity, as this handle was made with (used only when none
--         is stored)
-- ARGV[6] lease in milliseconds (> 0), restored when the owner keeps
--         permits
-- ARGV[7] record TTL in milliseconds (> 0)
-- ARGV[8] '' to keep a solo semaphore's final release's record as long as
--         the lease had left, or its TTL in milliseconds (see
--         release_record)
--
-- Reply: 1 released (now, or by an earlier run of the same request),
--        0 this owner does not hold the permits it believes it holds
--          (they lapsed or were taken back; nothing is changed).
--
-- The owner's own count decides what it keeps: Redis's count is set to
-- it, so permits that Redis counted beyond it (a grant it never took) are
-- given back too.
local key, tok = KEYS[1], ARGV[1]
if ARGV[4] == '0' and redis.call('EXISTS', key .. ':owners', key .. ':queue') == 0 and
    tonumber(redis.call('HGET', key, tok) or 0) >= tonumber(ARGV[3]) then
  -- The holder of a solo semaphore gives back its last permits, and
  -- nobody waits: the semaphore goes, renamed to this request's record
  -- (three calls, no clock).
  release_record(key, key .. ':r:' .. tok .. ':' .. ARGV[2], ARGV[8])
  return 1
end
-- @keys
if redis.call('EXISTS', KEYS[2]) == 1 then
  return 1 -- this request ran: its record is there
end
local ok, qk, tk = KEYS[3], KEYS[4], KEYS[5]
local left = tonumber(ARGV[4])
local now = server_ms()
sem_shared(key, ok, now)
if left == 0 then
  local owners = redis.call('ZRANGE', ok, 0, 1)
  if #owners == 1 and owners[1] == tok and tonumber(redis.call('HGET', key, tok) or 0) >= tonumber(ARGV[3])
      and redis.call('EXISTS', qk) == 0 then
    -- The only holder gives back its last permits, and nobody waits: the
    -- semaphore goes. (Its expiry is not checked: past it, the permits
    -- would be this owner's all the same, and its handle sends no
    -- release after its local deadline.)
    remember(KEYS[2], ARGV[2], 1, ARGV[7])
    redis.call('DEL', key, ok)
    return 1
  end
end
sem_expire(key, ok, now)
local c = sem_count(key, tok)
if left > 0 and c == left then
  -- Applied already (a resend whose record expired): nothing to do.
  return 1
end
if c == 0 or c < left + tonumber(ARGV[3]) then
  return 0
end
remember(KEYS[2], ARGV[2], 1, ARGV[7])
local cap = sem_capacity(key, tonumber(ARGV[5]))
if left > 0 then
  sem_live(key, ok, tok, cap, now + tonumber(ARGV[6]), now)
end
sem_set(key, ok, tok, c, left)
sem_admit(key, ok, qk, tk, key, cap, now, false)
sem_fit(key, ok, now)
return 1
