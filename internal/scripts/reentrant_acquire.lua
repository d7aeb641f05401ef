-- reentrant_acquire: take or re-enter a reentrant lock.
-- (record.lua, clock.lua, queue.lua and handoff.lua are prepended.)
--
-- KEYS[1] lock hash (field: owner token, value: hold count; "fence": the
--         fencing token of the hold, with fencing; TTL = lease)
-- KEYS[2] fencing counter (touched only with fencing; no TTL)
-- KEYS[3] request record of this owner (string "reqid|result", with a TTL)
-- KEYS[4] queue (sorted set entry -> arrival, see queue.lua)
-- KEYS[5] waiter deadlines (sorted set entry -> server ms)
-- ARGV[1..13] as mutex_acquire.lua (ARGV[4]: the hold count this owner
--         believes it has, 0 for a new hold; ARGV[6]: record TTL, used)
--
-- Reply: {1, fence} acquired (fence 0 without fencing or on re-entry),
--        {0, pttl, us} held by another owner (pttl: its remaining ms, 0 in
--                   its last millisecond, -1 unknown), or
--                   handed to a starving waiter (us: the server's time, see
--                   q_push),
--        {0, -3}    this request was aborted by its sender,
--        {0, -4}    re-entry refused: this owner's earlier hold is gone
--                   (lease lost), so the outer critical section is unsafe.
--
-- Idempotent: a retried re-entry finds its record and answers as the
-- first run did, so a lost reply never counts a hold twice; a retried new
-- hold finds this owner's field and takes it as its hold (it writes no
-- record: the abort of a new hold undoes any hold of the owner's). An
-- uncontended new hold costs four calls (the record, the lock, the queue,
-- then HSET and PEXPIRE): the server's clock is read only when someone
-- is queued.
local done = replayed(KEYS[3], ARGV[3])
if done == 'x' then return {0, -3} end
if done then return {1, tonumber(done)} end

local lk, fk, qk, tk, tok = KEYS[1], KEYS[2], KEYS[4], KEYS[5], ARGV[1]
local meta = ARGV[13]
local mine = q_entry(tok, ARGV[9], ARGV[10], ARGV[5], meta)
local taken = redis.call('EXISTS', lk) == 1
local held = taken and redis.call('HEXISTS', lk, tok) == 1
if ARGV[4] ~= '0' then
  if not held then return {0, -4} end
  redis.call('HINCRBY', lk, tok, 1)
  redis.call('PEXPIRE', lk, ARGV[2])
  remember(KEYS[3], ARGV[3], 0, ARGV[6])
  return {1, 0}
end
if held then
  -- This owner holds the lock but counts no hold: a resend whose first
  -- run succeeded, a grant to it whose push it missed, or a hold it lost
  -- track of (declared lost here, or an acquire it could not undo). It is
  -- the owner's new hold now, with the full lease and, with fencing, a
  -- new token.
  redis.call('HSET', lk, tok, 1)
  set_meta(lk, tok, meta)
  local fence = 0
  if ARGV[5] == '1' then
    -- A fencing token is drawn once per request: a resend answers it
    -- from the record.
    fence = redis.call('INCR', fk)
    redis.call('HSET', lk, 'fence', fence)
    remember(KEYS[3], ARGV[3], fence, ARGV[6])
  end
  if ARGV[9] ~= '' then q_remove(qk, tk, mine) end
  redis.call('PEXPIRE', lk, ARGV[2])
  return {1, fence}
end

local head, now = starving(qk, tk, ARGV[12]) -- now: nil when nobody is queued
if not taken then
  if head and q_parse(head) ~= tok then
    grant_to(head, lk, fk, qk, tk, ARGV[11], false)
  else
    if head then q_remove(qk, tk, head) end
    if now and ARGV[9] ~= '' then q_remove(qk, tk, mine) end
    redis.call('HSET', lk, tok, 1)
    set_meta(lk, tok, meta)
    local fence = 0
    if ARGV[5] == '1' then
      -- A fencing token is drawn once per request: a resend answers it
      -- from the record.
      fence = redis.call('INCR', fk)
      redis.call('HSET', lk, 'fence', fence)
      remember(KEYS[3], ARGV[3], fence, ARGV[6])
    end
    redis.call('PEXPIRE', lk, ARGV[2])
    return {1, fence}
  end
end

if ARGV[7] == '1' then
  q_join(qk, tk, mine, now or server_ms(), tonumber(ARGV[8]))
end
local pttl = redis.call('PTTL', lk)
-- -2: the key expired since it was read (miniredis's clock runs on during a
-- script; Redis's stands still): try again at once. -1: no TTL (not a key
-- of relock's): unknown.
if pttl == -2 then pttl = 0 end
return {0, pttl, server_us()}
