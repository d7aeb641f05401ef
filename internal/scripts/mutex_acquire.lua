-- mutex_acquire: take a plain (non-reentrant) mutex if it is free.
-- (record.lua, clock.lua, queue.lua and handoff.lua are prepended.)
--
-- KEYS[1] lock key (string: owner token, or token..":"..fence)
-- KEYS[2] fencing counter (touched only with fencing; no TTL)
-- KEYS[3] request record of this owner (string "reqid|result", with a TTL)
-- KEYS[4] queue (sorted set entry -> arrival, see queue.lua)
-- KEYS[5] waiter deadlines (sorted set entry -> server ms)
-- ARGV[1] owner token
-- ARGV[2] lease in milliseconds (> 0)
-- ARGV[3] request id (unique per owner)
-- ARGV[4] hold count this owner believes it has (always 0: not reentrant)
-- ARGV[5] "1" to issue a fencing token, "0" not to
-- ARGV[6] record TTL in milliseconds (only an acquire with fencing writes a
--         record: without, a resend is recognised by the owner's token)
-- ARGV[7] "1" if the caller waits when refused (it joins the queue)
-- ARGV[8] heartbeat timeout of a waiter, in milliseconds
-- ARGV[9] the caller's wait id ("" for a TryLock)
-- ARGV[10] claim lease of a grant to this caller, in milliseconds
-- ARGV[11] the lock's channel (grants are pushed there)
-- ARGV[12] starvation threshold in milliseconds (see handoff.lua)
-- ARGV[13] the owner's metadata ('' or absent: none; see m_value)
--
-- Reply: {1, fence} when acquired (fence 0 without fencing),
--        {0, pttl, us} when another owner holds it (pttl: holder's
--                  remaining ms, 0 in its last millisecond, -1 unknown) or
--                  it is handed to a starving waiter (us: the server's
--                  time, see q_push),
--        {0, -3} when this request was aborted by its sender (see abort.lua).
--
-- Idempotent: a retried request (go-redis resends after a read timeout)
-- finds either its own record or its own token and answers as the first run
-- did, so a lost reply never turns into a spurious failure.
local done = replayed(KEYS[3], ARGV[3])
if done == 'x' then return {0, -3} end
if done then return {1, tonumber(done)} end

local lk, fk, qk, tk, tok = KEYS[1], KEYS[2], KEYS[4], KEYS[5], ARGV[1]
local meta = ARGV[13]
local mine = q_entry(tok, ARGV[9], ARGV[10], ARGV[5], meta)
local v = redis.call('GET', lk)
if v and owns(v, tok) then
  -- A resend of this owner's acquire whose first run succeeded (whose
  -- reply the caller never saw), a grant to this owner whose push it
  -- missed, or a hold it lost track of: its new hold now, with the full
  -- lease and, with fencing, a new token.
  if ARGV[9] ~= '' then q_remove(qk, tk, mine) end
  if ARGV[5] == '1' then
    local fence = redis.call('INCR', fk)
    redis.call('SET', lk, m_value(tok, fence, meta), 'PX', ARGV[2])
    remember(KEYS[3], ARGV[3], fence, ARGV[6])
    return {1, fence}
  end
  redis.call('SET', lk, m_value(tok, 0, meta), 'PX', ARGV[2])
  return {1, 0}
end

local head, now = starving(qk, tk, ARGV[12])
if not v then
  if head and q_parse(head) ~= tok then
    -- Free, but the longest waiter starves: it holds it now.
    grant_to(head, lk, fk, qk, tk, ARGV[11], true)
  else
    if head then q_remove(qk, tk, head) end
    if now and ARGV[9] ~= '' then q_remove(qk, tk, mine) end -- now: a queue exists
    if ARGV[5] == '1' then
      local fence = redis.call('INCR', fk)
      redis.call('SET', lk, m_value(tok, fence, meta), 'PX', ARGV[2])
      remember(KEYS[3], ARGV[3], fence, ARGV[6])
      return {1, fence}
    end
    redis.call('SET', lk, m_value(tok, 0, meta), 'PX', ARGV[2])
    return {1, 0}
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
