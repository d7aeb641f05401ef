-- semaphore_acquire: take n permits of a semaphore, in queue order (see
-- semaphore_common.lua for its data). (record.lua, clock.lua, queue.lua
-- and semaphore_common.lua are prepended.)
--
-- KEYS[1] semaphore hash
-- KEYS[2] request record of this owner (string "reqid|result", with a TTL)
-- KEYS[3] owners (sorted set owner -> expiry)
-- KEYS[4] queue of waiters (see queue.lua)
-- KEYS[5] waiters' deadlines
-- ARGV[1] owner token
-- ARGV[2] lease in milliseconds (> 0)
-- ARGV[3] request id (unique per owner)
-- ARGV[4] permits this owner believes it holds
-- ARGV[5] n, the permits asked for (1 <= n <= capacity)
-- ARGV[6] capacity, as this handle was made with
-- ARGV[7] record TTL in milliseconds (> 0)
-- ARGV[8] "1" when the caller waits if refused (it then joins the queue),
--         "0" for a single try (never joins it)
-- ARGV[9] heartbeat timeout of a waiter, in milliseconds
-- ARGV[10] the caller's wait id ("" for a single try)
-- ARGV[11] claim lease of a grant to this caller, in milliseconds
-- ARGV[12] the semaphore's channel (grants are pushed there)
-- ARGV[13] the owner's metadata ('' or absent: none)
--
-- Reply: {1, 0}   acquired,
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
local done = replayed(KEYS[2], ARGV[3])
if done == 'x' then return {0, -3} end
if done then return {1, 0} end

local key, ok, qk, tk, tok = KEYS[1], KEYS[3], KEYS[4], KEYS[5], ARGV[1]
local lease, have, n = tonumber(ARGV[2]), tonumber(ARGV[4]), tonumber(ARGV[5])
local channel = ARGV[12]
local meta = ARGV[13]
if have == 0 and redis.call('EXISTS', ok) == 0 and redis.call('EXISTS', qk) == 0 then
  -- Nobody holds permits or waits: granted at once, and the capacity is
  -- this handle's (none is stored while nobody holds). It writes no
  -- record: a resend finds the permits this owner holds beyond what it
  -- counts and takes them, and the abort of a new hold gives back any
  -- permits of the owner's.
  local now = server_ms()
  redis.call('HSET', key, 'permits', ARGV[6], 'used', n, tok, n)
  set_meta(key, tok, meta)
  redis.call('ZADD', ok, now + lease, tok)
  redis.call('PEXPIRE', key, lease)
  redis.call('PEXPIRE', ok, lease)
  return {1, 0}
end
local mine = q_entry(tok, ARGV[10], ARGV[11], ARGV[5], meta)
local now = server_ms()
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
    sem_set(key, ok, tok, c, have + n, meta)
    sem_live(key, ok, tok, cap, now + lease, now)
    q_remove(qk, tk, mine)
    sem_admit(key, ok, qk, tk, channel, cap, now, false)
    sem_fit(key, ok, now)
    remember(KEYS[2], ARGV[3], 0, ARGV[7])
    return {1, 0}
  end
  sem_set(key, ok, tok, c, have)
end

local head = sem_admit(key, ok, qk, tk, channel, cap, now, mine)
if n <= cap - sem_used(key) and (not head or head == mine) then
  sem_set(key, ok, tok, have, have + n, meta)
  sem_live(key, ok, tok, cap, now + lease, now)
  if head then
    q_remove(qk, tk, mine)
    -- The waiters behind may fit in what is left.
    sem_admit(key, ok, qk, tk, channel, cap, now, false)
  end
  sem_fit(key, ok, now)
  remember(KEYS[2], ARGV[3], 0, ARGV[7])
  return {1, 0}
end

if ARGV[8] == '1' then
  q_join(qk, tk, mine, now, tonumber(ARGV[9]))
end
sem_fit(key, ok, now)
return {0, sem_refused(ok, now), server_us()}
