-- fair_acquire: take or re-enter a fair lock, strictly in queue order.
-- (record.lua, clock.lua, queue.lua and fair_common.lua are prepended.)
--
-- KEYS[1] lock hash (owner token -> hold count; "fence" -> the fencing
--         token of the current hold, with fencing; TTL = lease)
-- KEYS[2] fencing counter (touched only with fencing; no TTL)
-- KEYS[3] request record of this owner ("reqid|result", with a TTL)
-- KEYS[4] queue (sorted set entry -> arrival, see queue.lua)
-- KEYS[5] waiter deadlines (sorted set entry -> server ms)
-- ARGV[1] owner token
-- ARGV[2] lease in milliseconds (> 0)
-- ARGV[3] request id (unique per owner)
-- ARGV[4] hold count this owner believes it has (0: a new hold)
-- ARGV[5] "1" to issue a fencing token on a new hold
-- ARGV[6] record TTL in milliseconds (> 0)
-- ARGV[7] "1" if the caller will wait (joins or stays in the queue),
--         "0" for a one-shot TryLock (never joins the queue)
-- ARGV[8] heartbeat timeout in milliseconds (> 0)
-- ARGV[9] the caller's wait id ("" for a TryLock)
-- ARGV[10] claim lease of a grant to this caller, in milliseconds
-- ARGV[11] prefix of the waiters' own wake-up channels
-- ARGV[12] unused (the starvation threshold of the other lock types)
-- ARGV[13] the owner's metadata ('' or absent: none; in its hash as the
--          field "<token>|m", see set_meta)
--
-- Reply: {1, fence} acquired; {0, pttl, us} not yet (pttl: the holder's
-- remaining ms, the claim lease when the lock was just granted to an
-- earlier waiter, 0 in the hold's last millisecond, -1 unknown; us: the
-- server's time, see q_push); {0, -3} request aborted; {0, -4} re-entry on
-- a lost hold.
--
-- Time is the server's (TIME), never a client's clock. Every waiting call
-- refreshes the caller's deadline (its heartbeat), so a live waiter is never
-- dropped; a dead one is dropped once it reaches the head past its deadline.
-- A free lock goes to the head of the queue: a release grants it there
-- (fair_release.lua); finding it free with a live head (its holder's lease
-- ran out), this call grants it to the head instead of taking it.
--
-- An uncontended new hold (nobody queued) costs four calls and reads no
-- clock: the record, the lock, the queue, then HSET and PEXPIRE. A new
-- hold writes no record: a resend finds this owner's field and takes it,
-- and the abort of a new hold undoes any hold of the owner's.
local done = replayed(KEYS[3], ARGV[3])
if done == 'x' then return {0, -3} end
if done then return {1, tonumber(done)} end

local lk, fk, qk, tk, tok = KEYS[1], KEYS[2], KEYS[4], KEYS[5], ARGV[1]
local hb, prefix = tonumber(ARGV[8]), ARGV[11]
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

local queued = redis.call('EXISTS', qk) == 1
if held then
  -- This owner holds the lock but counts no hold: a grant made to it
  -- whose push it missed, a resend whose first run succeeded, or a hold
  -- it lost track of (declared lost here, or an acquire it could not
  -- undo). It is the owner's new hold now, with the full lease and, with
  -- fencing, a new token.
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
  if queued then q_remove(qk, tk, mine) end
  redis.call('PEXPIRE', lk, ARGV[2])
  return {1, fence}
end

local now
if not taken then
  local head = false
  if queued then
    now = server_ms()
    head = q_head(qk, tk, now)
  end
  if head and q_parse(head) ~= tok then
    -- Free, but an earlier waiter goes first: it holds it now.
    grant_head(lk, fk, qk, tk, prefix, now)
  else
    if head then q_remove(qk, tk, head) end
    if queued then q_remove(qk, tk, mine) end
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
  q_join(qk, tk, mine, now or server_ms(), hb)
end
local pttl = redis.call('PTTL', lk)
-- -2: the key expired since it was read (miniredis's clock runs on during a
-- script; Redis's stands still): try again at once. -1: no TTL (not a key
-- of relock's): unknown.
if pttl == -2 then pttl = 0 end
return {0, pttl, server_us()}
