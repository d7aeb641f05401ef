-- mutex_acquire: take a plain (non-reentrant) mutex if it is free.
-- (record.lua, clock.lua, queue.lua and handoff.lua are prepended.) A
-- mutex's first attempt is a native SET NX PX (without fencing): this
-- script runs when that was refused, or with fencing.
--
-- KEYS[1] lock key (string: owner token, then ":" and the fencing token
--         with fencing, then "|" and the metadata, if any: see m_value);
--         the script builds the lock's other keys (scripts.deriving):
--         KEYS[2] fencing counter (touched only with fencing; no TTL),
--         KEYS[3] this request's record, KEYS[4] queue (sorted set entry
--         -> arrival, see queue.lua), KEYS[5] waiter deadlines
-- ARGV[1] owner token
-- ARGV[2] lease in milliseconds (> 0)
-- ARGV[3] request id (unique per owner)
-- ARGV[4] hold count this owner believes it has (always 0: not reentrant)
-- ARGV[5] "1" to issue a fencing token, "0" not to
-- ARGV[6] what a refused attempt needs (see q_args): whether it waits,
--         its heartbeat, wait id, claim lease and record TTL (only an
--         acquire with fencing writes a record: without, a resend is
--         recognised by the owner's token)
-- ARGV[7] optional: the owner's metadata (absent or '': none)
-- ARGV[8] optional: the starvation threshold in ms (see handoff.lua)
--
-- Reply: {1, fence} when acquired (fence 0 without fencing), or {1, fence,
--                  1} when this request's record was written (see core.Sweeper),
--        {0, pttl, us} when another owner holds it (pttl: holder's
--                  remaining ms, 0 in its last millisecond, -1 unknown) or
--                  it is handed to a starving waiter (us: the server's
--                  time, see q_push),
--        {0, -3} when this request was aborted by its sender (see mutex_abort.lua).
--
-- Idempotent: a retried request (go-redis resends after a read timeout)
-- finds either its own record or its own token and answers as the first run
-- did, so a lost reply never turns into a spurious failure.
-- @keys
local done = replayed(KEYS[3], ARGV[3])
if done == 'x' then return {0, -3} end
if done then return {1, tonumber(done), 1} end

local lk, fk, qk, tk, tok = KEYS[1], KEYS[2], KEYS[4], KEYS[5], ARGV[1]
local meta, fencing = ARGV[7] or '', ARGV[5]
local block, hb, wait, claim, rttl = q_args(ARGV[6])
local mine = q_entry(tok, wait, claim, fencing, meta)
local v = redis.call('GET', lk)
if v and owns(v, tok) then
  -- A resend of this owner's acquire whose first run succeeded (whose
  -- reply the caller never saw), a grant to this owner whose push it
  -- missed, or a hold it lost track of: its new hold now, with the full
  -- lease and, with fencing, a new token.
  if wait ~= '' then q_remove(qk, tk, mine) end
  if fencing == '1' then
    local fence = redis.call('INCR', fk)
    redis.call('SET', lk, m_value(tok, fence, meta), 'PX', ARGV[2])
    remember(KEYS[3], ARGV[3], fence, rttl)
    return {1, fence, 1}
  end
  redis.call('SET', lk, m_value(tok, 0, meta), 'PX', ARGV[2])
  return {1, 0}
end

local head, now = starving(qk, tk, starve_ms(ARGV[8]))
if not v then
  if head and q_parse(head) ~= tok then
    -- Free, but the longest waiter starves: it holds it now.
    grant_to(head, lk, fk, qk, tk, lk, true)
  else
    if head then q_remove(qk, tk, head) end
    if now and wait ~= '' then q_remove(qk, tk, mine) end -- now: a queue exists
    if fencing == '1' then
      local fence = redis.call('INCR', fk)
      redis.call('SET', lk, m_value(tok, fence, meta), 'PX', ARGV[2])
      remember(KEYS[3], ARGV[3], fence, rttl)
      return {1, fence, 1}
    end
    redis.call('SET', lk, m_value(tok, 0, meta), 'PX', ARGV[2])
    return {1, 0}
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
