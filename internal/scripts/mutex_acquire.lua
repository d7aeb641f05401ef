-- mutex_acquire: take a plain (non-reentrant) mutex if it is free.
-- (record.lua is prepended.)
--
-- KEYS[1] lock key (string: owner token, or token..":"..fence)
-- KEYS[2] fencing counter (touched only when ARGV[5] == "1"; no TTL)
-- KEYS[3] request record of this owner (string "reqid|result", with a TTL)
-- ARGV[1] owner token
-- ARGV[2] lease in milliseconds (> 0)
-- ARGV[3] request id (unique per owner)
-- ARGV[4] hold count this owner believes it has (always 0: not reentrant)
-- ARGV[5] "1" to issue a fencing token, "0" not to
-- ARGV[6] record TTL in milliseconds (unused: a mutex acquire writes no record)
--
-- Reply: {1, fence} when acquired (fence 0 without fencing),
--        {0, pttl} when another owner holds it (pttl: holder's remaining ms),
--        {0, -3} when this request was aborted by its sender (see abort.lua).
--
-- Idempotent: a retried request (go-redis resends after a read timeout)
-- finds either its own record or its own token and answers as the first run
-- did, so a lost reply never turns into a spurious failure.
local done = replayed(KEYS[3], ARGV[3])
if done == 'x' then return {0, -3} end
if done then return {1, tonumber(done)} end

local tok = ARGV[1]
local v = redis.call('GET', KEYS[1])
if v then
  if owns(v, tok) then
    -- A resend of this owner's acquire whose first run succeeded.
    redis.call('PEXPIRE', KEYS[1], ARGV[2])
    return {1, tonumber(string.sub(v, #tok + 2)) or 0}
  end
  return {0, redis.call('PTTL', KEYS[1])}
end

if ARGV[5] == '1' then
  local fence = redis.call('INCR', KEYS[2])
  redis.call('SET', KEYS[1], tok .. ':' .. fence, 'PX', ARGV[2])
  return {1, fence}
end
redis.call('SET', KEYS[1], tok, 'PX', ARGV[2])
return {1, 0}
