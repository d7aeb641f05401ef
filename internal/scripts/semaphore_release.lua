-- semaphore_release: give back n permits of a semaphore; what comes back
-- goes to the head(s) of the queue. (record.lua, clock.lua, queue.lua and
-- semaphore_common.lua are prepended.)
--
-- KEYS[1..5] as semaphore_acquire.lua
-- ARGV[1] owner token
-- ARGV[2] request id
-- ARGV[3] lease in milliseconds (> 0), restored when the owner keeps
--         permits
-- ARGV[4] record TTL in milliseconds (> 0)
-- ARGV[5] the semaphore's channel
-- ARGV[6] n, the permits given back
-- ARGV[7] permits the owner keeps after this release (its own count)
-- ARGV[8] capacity, as this handle was made with (used only when none
--         is stored)
--
-- Reply: 1 released (now, or by an earlier run of the same request),
--        0 this owner does not hold the permits it believes it holds
--          (they lapsed or were taken back; nothing is changed).
--
-- The owner's own count decides what it keeps: Redis's count is set to
-- it, so permits that Redis counted beyond it (a grant it never took) are
-- given back too.
local key, ok, qk, tk, tok = KEYS[1], KEYS[3], KEYS[4], KEYS[5], ARGV[1]
local left = tonumber(ARGV[7])
if left == 0 then
  local owners = redis.call('ZRANGE', ok, 0, 1)
  if #owners == 1 and owners[1] == tok and tonumber(redis.call('HGET', key, tok) or 0) >= tonumber(ARGV[6])
      and redis.call('EXISTS', qk) == 0 then
    -- The only holder gives back its last permits, and nobody waits: the
    -- semaphore goes. (Its expiry is not checked: past it, the permits
    -- would be this owner's all the same, and its handle sends no
    -- release after its local deadline.)
    remember(KEYS[2], ARGV[2], 1, ARGV[4])
    redis.call('DEL', key, ok)
    return 1
  end
end
if replayed(KEYS[2], ARGV[2]) then
  return 1
end

local now = server_ms()
sem_expire(key, ok, now)
local c = sem_count(key, tok)
if left > 0 and c == left then
  -- Applied already (a resend whose record expired): nothing to do.
  return 1
end
if c == 0 or c < left + tonumber(ARGV[6]) then
  return 0
end
remember(KEYS[2], ARGV[2], 1, ARGV[4])
local cap = sem_capacity(key, tonumber(ARGV[8]))
sem_set(key, ok, tok, c, left)
if left > 0 then
  sem_live(key, ok, tok, cap, now + tonumber(ARGV[3]), now)
end
sem_admit(key, ok, qk, tk, ARGV[5], cap, now, false)
sem_fit(key, ok, now)
return 1
