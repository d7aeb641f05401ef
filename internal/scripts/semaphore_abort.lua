-- semaphore_abort: undo an acquire whose outcome is unknown, or that was
-- granted after its caller gave up. (record.lua, clock.lua, queue.lua and
-- semaphore_common.lua are prepended.)
--
-- KEYS[1] semaphore hash (the script builds the others, as
--         semaphore_acquire.lua; KEYS[2] is the abandoned acquire's record)
-- ARGV[1] owner token
-- ARGV[2] request id of the abandoned acquire
-- ARGV[3] record TTL in milliseconds (> 0)
-- ARGV[4] permits the owner held before the abandoned acquire
-- ARGV[5] capacity, as this handle was made with (used only when none
--         is stored)
--
-- Reply: 1 if the abandoned acquire had been applied (now undone), else 0.
-- The record marks the request aborted either way, so a late copy of it
-- (a resend on another connection) is refused instead of applied. A
-- waiter that gives up also leaves the queue (semaphore_leave.lua).
local key, ok, tok = KEYS[1], KEYS[3], ARGV[1]
local before = tonumber(ARGV[4])
local now = server_ms()
sem_shared(key, ok, now)
-- A new hold writes no record: with nothing held before, any permits of
-- the owner's come from the abandoned acquire (or are a grant it will not
-- take), and go.
local applied = (before == 0 and redis.call('ZSCORE', ok, tok)) or replayed(KEYS[2], ARGV[2])
remember(KEYS[2], ARGV[2], 'x', ARGV[3])
if not applied then
  return 0
end
sem_expire(key, ok, now)
local c = sem_count(key, tok)
if c > before then
  sem_set(key, ok, tok, c, before)
end
local cap = sem_capacity(key, tonumber(ARGV[5]))
sem_admit(key, ok, KEYS[4], KEYS[5], key, cap, now, false)
sem_fit(key, ok, now)
return 1
