-- reentrant_acquire: take or re-enter a reentrant lock.
-- (record.lua is prepended.)
--
-- KEYS[1] lock hash (field: owner token, value: hold count; TTL = lease)
-- KEYS[2] fencing counter (touched only when ARGV[5] == "1"; no TTL)
-- KEYS[3] request record of this owner (string "reqid|result", with a TTL)
-- ARGV[1] owner token
-- ARGV[2] lease in milliseconds (> 0)
-- ARGV[3] request id (unique per owner)
-- ARGV[4] hold count this owner believes it has (0: a new hold)
-- ARGV[5] "1" to issue a fencing token on a new hold, "0" not to
-- ARGV[6] record TTL in milliseconds (> 0)
--
-- Reply: {1, fence} acquired (fence 0 without fencing or on re-entry),
--        {0, pttl}  held by another owner (pttl: its remaining ms),
--        {0, -3}    this request was aborted by its sender,
--        {0, -4}    re-entry refused: this owner's earlier hold is gone
--                   (lease lost), so the outer critical section is unsafe.
--
-- Idempotent: a retried request finds its record and answers as the first
-- run did, so a lost reply never counts a hold twice.
local done = replayed(KEYS[3], ARGV[3])
if done == 'x' then return {0, -3} end
if done then return {1, tonumber(done)} end

local tok = ARGV[1]
local held = redis.call('HGET', KEYS[1], tok)
if ARGV[4] ~= '0' and not held then
  return {0, -4}
end
if not held and redis.call('EXISTS', KEYS[1]) == 1 then
  return {0, redis.call('PTTL', KEYS[1])}
end

redis.call('HINCRBY', KEYS[1], tok, 1)
redis.call('PEXPIRE', KEYS[1], ARGV[2])
local fence = 0
if not held and ARGV[5] == '1' then
  fence = redis.call('INCR', KEYS[2])
end
remember(KEYS[3], ARGV[3], fence, ARGV[6])
return {1, fence}
