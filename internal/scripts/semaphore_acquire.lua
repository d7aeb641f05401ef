-- semaphore_acquire: take n permits of a semaphore, in queue order (see
-- semaphore_common.lua for its data). (record.lua, clock.lua, queue.lua
-- and semaphore_common.lua are prepended.)
--
-- KEYS[1] semaphore hash (its channel too); the script builds the
--         others (scripts.deriving): KEYS[2] this request's record,
--         KEYS[3] owners (sorted set owner -> expiry), KEYS[4] queue of
--         waiters (see queue.lua), KEYS[5] waiters' deadlines
-- ARGV[1] owner token
-- ARGV[2] lease in milliseconds (> 0)
-- ARGV[3] request id (unique per owner)
-- ARGV[4] permits this owner believes it holds
-- ARGV[5] n, the permits asked for (1 <= n <= capacity)
-- ARGV[6] capacity, as this handle was made with
-- ARGV[7] what a refused attempt needs (see q_args): whether it waits
--         (it then joins the queue), its heartbeat, wait id, claim lease
--         and record TTL
-- ARGV[8] optional: the owner's metadata (absent or '': none)
--
-- Reply: {1, 0}   acquired ({1, 0, 1}: and this request's record was
--                 written, see core.Sweeper),
--        {0, ms, us} refused: try again once ms have passed (until the
--                 earliest holder lapses, 0: at once), or on a grant (us:
--                 the server's time, see q_push),
--        {0, -3}  this request was aborted by its sender,
--        {0, -4}  refused: this owner's earlier permits are gone (lapsed
--                 or taken back), so they must be reported lost,
--        error "RELOCK_CAPACITY <c>": the semaphore is in use with
--                 capacity c, not ARGV[6] (nothing is changed).
--
-- n permits are granted when they fit in the free permits and nobody
-- waits ahead (a single try fails while anyone waits: FIFO). Permits that
-- Redis counts for this owner beyond its own count are a grant made to it
-- whose push it missed (taken as this request when it is at least n) or
-- left over from an acquire it could not undo (given back). Idempotent:
-- a resent request finds its record and answers as the first run did.
local key, tok = KEYS[1], ARGV[1]
if ARGV[4] == '0' and
    redis.call('EXISTS', key, key .. ':owners', key .. ':queue', key .. ':r:' .. tok .. ':' .. ARGV[3]) == 0 then
  -- Nobody holds permits or waits, and this request was not aborted:
  -- granted at once, solo (see semaphore_common.lua), with this handle's
  -- capacity (none is stored while nobody holds). It writes no record: a
  -- resend finds the permits this owner holds beyond what it counts and
  -- takes them, and the abort of a new hold gives back any permits of the
  -- owner's.
  if not ARGV[8] or ARGV[8] == '' then
    redis.call('HSET', key, 'permits', ARGV[6], 'used', ARGV[5], tok, ARGV[5])
  else
    redis.call('HSET', key, 'permits', ARGV[6], 'used', ARGV[5], tok, ARGV[5], tok .. '|m', ARGV[8])
  end
  redis.call('PEXPIRE', key, ARGV[2])
  return {1, 0}
end
-- @keys
local done = replayed(KEYS[2], ARGV[3])
if done == 'x' then return {0, -3} end
if done then return {1, 0, 1} end

local ok, qk, tk = KEYS[3], KEYS[4], KEYS[5]
local lease, have, n = tonumber(ARGV[2]), tonumber(ARGV[4]), tonumber(ARGV[5])
local meta = ARGV[8] or ''
local block, hb, wait, claim, rttl = q_args(ARGV[7])
local mine = q_entry(tok, wait, claim, ARGV[5], meta)
local now = server_ms()
sem_shared(key, ok, now)
sem_expire(key, ok, now)
local cap, mismatch = sem_capacity(key, tonumber(ARGV[6]))
if mismatch then
  return redis.error_reply('RELOCK_CAPACITY ' .. cap)
end

local c = sem_count(key, tok)
if c < have then
  return {0, -4}
end
if c > have then
  if c - have >= n then
    -- A grant to this caller (or a hold this owner lost track of): taken
    -- as this request, with the full lease; the rest is given back.
    sem_live(key, ok, tok, cap, now + lease, now)
    sem_set(key, ok, tok, c, have + n, meta)
    q_remove(qk, tk, mine)
    sem_admit(key, ok, qk, tk, key, cap, now, false)
    sem_fit(key, ok, now)
    remember(KEYS[2], ARGV[3], 0, rttl)
    return {1, 0, 1}
  end
  sem_set(key, ok, tok, c, have)
end

local head = sem_admit(key, ok, qk, tk, key, cap, now, mine)
if n <= cap - sem_used(key) and (not head or head == mine) then
  sem_live(key, ok, tok, cap, now + lease, now)
  sem_set(key, ok, tok, have, have + n, meta)
  if head then
    q_remove(qk, tk, mine)
    -- The waiters behind may fit in what is left.
    sem_admit(key, ok, qk, tk, key, cap, now, false)
  end
  sem_fit(key, ok, now)
  remember(KEYS[2], ARGV[3], 0, rttl)
  return {1, 0, 1}
end

if block then
  q_join(qk, tk, mine, now, hb)
end
sem_fit(key, ok, now)
return {0, sem_refused(ok, now), server_us()}
