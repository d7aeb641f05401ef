-- fair_acquire: take or re-enter a fair lock, strictly in queue order.
-- (record.lua, clock.lua and fair_common.lua are prepended.)
--
-- KEYS[1] lock hash (owner token -> hold count; TTL = lease)
-- KEYS[2] fencing counter (touched only when ARGV[5] == "1"; no TTL)
-- KEYS[3] request record of this owner ("reqid|result", with a TTL)
-- KEYS[4] queue (list of waiting owner tokens)
-- KEYS[5] waiter deadlines (sorted set owner -> server ms)
-- ARGV[1] owner token
-- ARGV[2] lease in milliseconds (> 0)
-- ARGV[3] request id (unique per owner)
-- ARGV[4] hold count this owner believes it has (0: a new hold)
-- ARGV[5] "1" to issue a fencing token on a new hold
-- ARGV[6] record TTL in milliseconds (> 0)
-- ARGV[7] "1" if the caller will wait (joins or stays in the queue),
--         "0" for a one-shot TryLock (never joins the queue)
-- ARGV[8] heartbeat timeout in milliseconds (> 0)
-- ARGV[9] prefix of the waiters' own wake-up channels
--
-- Reply: {1, fence} acquired; {0, pttl} not yet (pttl: the holder's
-- remaining ms, 0 when the lock is free but another waiter is ahead);
-- {0, -3} request aborted; {0, -4} re-entry on a lost hold.
--
-- Time is the server's (TIME), never a client's clock. Every waiting call
-- refreshes the caller's deadline (its heartbeat), so a live waiter is never
-- dropped; a dead one is dropped once it reaches the head past its deadline.
local done = replayed(KEYS[3], ARGV[3])
if done == 'x' then return {0, -3} end
if done then return {1, tonumber(done)} end

local lk, qk, zk, tok = KEYS[1], KEYS[4], KEYS[5], ARGV[1]
local hb = tonumber(ARGV[8])
local now = server_ms()
local held = redis.call('HGET', lk, tok)
if ARGV[4] ~= '0' and not held then
  return {0, -4}
end

local function grant()
  redis.call('HINCRBY', lk, tok, 1)
  redis.call('PEXPIRE', lk, ARGV[2])
  local fence = 0
  if not held and ARGV[5] == '1' then
    fence = redis.call('INCR', KEYS[2])
  end
  remember(KEYS[3], ARGV[3], fence, ARGV[6])
  return {1, fence}
end

if held then
  return grant()
end

local head = prune(qk, zk, now)
if redis.call('EXISTS', lk) == 0 then
  if not head or head == tok then
    if head then
      redis.call('LPOP', qk)
      redis.call('ZREM', zk, tok)
    end
    return grant()
  end
end

if ARGV[7] == '1' then
  if not redis.call('ZSCORE', zk, tok) then
    redis.call('RPUSH', qk, tok)
  end
  redis.call('ZADD', zk, now + hb, tok)
  -- Waiters may have different heartbeats: extend the queue's life to
  -- this waiter's deadline, never shorten it below another's.
  extend(qk, hb)
  extend(zk, hb)
end
local pttl = redis.call('PTTL', lk)
if pttl < 0 then
  -- Free, but an earlier waiter goes first: make sure it knows.
  if head then redis.call('PUBLISH', ARGV[9] .. head, '1') end
  pttl = 0
end
return {0, pttl}
