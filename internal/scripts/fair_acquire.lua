-- fair_acquire: take or re-enter a fair lock, strictly in queue order.
-- (record.lua, clock.lua, queue.lua and fair_common.lua are prepended.)
--
-- KEYS[1] lock hash (owner token -> hold count; "fence" -> the fencing
--         token of the current hold, with fencing; "<token>|m" -> the
--         owner's metadata; TTL = lease); the script builds the lock's
--         other keys as mutex_acquire.lua does
-- ARGV[1..7] as mutex_acquire.lua (ARGV[4]: the hold count this owner
--         believes it has, 0 for a new hold). A grant is pushed on the
--         waiter's own channel, <lock>:w:<token>.
--
-- Reply: {1, fence} acquired ({1, fence, 1} when this request's record
-- was written); {0, pttl, us} not yet (pttl: the holder's
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
-- An uncontended new hold without fencing (nobody queued) costs three
-- calls and reads no clock: one EXISTS of the lock, its queue and this
-- request's record (an abort's mark), then HSET and PEXPIRE. A new hold
-- writes no record: a resend finds this owner's field and takes it, and
-- the abort of a new hold undoes any hold of the owner's.
local lk, tok = KEYS[1], ARGV[1]
if ARGV[4] == '0' and ARGV[5] == '0' and
    redis.call('EXISTS', lk, lk .. ':queue', lk .. ':r:' .. tok .. ':' .. ARGV[3]) == 0 then
  if not ARGV[7] or ARGV[7] == '' then
    redis.call('HSET', lk, tok, '1')
  else
    redis.call('HSET', lk, tok, '1', tok .. '|m', ARGV[7])
  end
  redis.call('PEXPIRE', lk, ARGV[2])
  return {1, 0}
end
-- @keys
local done = replayed(KEYS[3], ARGV[3])
if done == 'x' then return {0, -3} end
if done then return {1, tonumber(done), 1} end

local fk, qk, tk = KEYS[2], KEYS[4], KEYS[5]
local prefix = lk .. ':w:'
local meta, fencing = ARGV[7] or '', ARGV[5]
local block, hb, wait, claim, rttl = q_args(ARGV[6])
local mine = q_entry(tok, wait, claim, fencing, meta)
local taken = redis.call('EXISTS', lk) == 1
local held = taken and redis.call('HEXISTS', lk, tok) == 1
if ARGV[4] ~= '0' then
  if not held then return {0, -4} end
  redis.call('HINCRBY', lk, tok, '1')
  redis.call('PEXPIRE', lk, ARGV[2])
  remember(KEYS[3], ARGV[3], 0, rttl)
  return {1, 0, 1}
end

local queued = redis.call('EXISTS', qk) == 1
if held then
  -- This owner holds the lock but counts no hold: a grant made to it
  -- whose push it missed, a resend whose first run succeeded, or a hold
  -- it lost track of (declared lost here, or an acquire it could not
  -- undo). It is the owner's new hold now, with the full lease and, with
  -- fencing, a new token.
  redis.call('HSET', lk, tok, '1')
  set_meta(lk, tok, meta)
  local fence = 0
  if fencing == '1' then
    -- A fencing token is drawn once per request: a resend answers it
    -- from the record.
    fence = redis.call('INCR', fk)
    redis.call('HSET', lk, 'fence', fence)
    remember(KEYS[3], ARGV[3], fence, rttl)
  end
  if queued then q_remove(qk, tk, mine) end
  redis.call('PEXPIRE', lk, ARGV[2])
  return {1, fence, fence > 0 and 1 or 0}
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
    redis.call('HSET', lk, tok, '1')
    set_meta(lk, tok, meta)
    local fence = 0
    if fencing == '1' then
      -- A fencing token is drawn once per request: a resend answers it
      -- from the record.
      fence = redis.call('INCR', fk)
      redis.call('HSET', lk, 'fence', fence)
      remember(KEYS[3], ARGV[3], fence, rttl)
    end
    redis.call('PEXPIRE', lk, ARGV[2])
    return {1, fence, fence > 0 and 1 or 0}
  end
end

if block then
  q_join(qk, tk, mine, now or server_ms(), hb)
end
local pttl = redis.call('PTTL', lk)
-- -2: the key expired since it was read (miniredis's clock runs on during a
-- script; Redis's stands still): try again at once. -1: no TTL (not a key
-- of relock's): unknown.
if pttl == -2 then pttl = 0 end
return {0, pttl, server_us()}
