-- rwlock_acquire: take or re-enter a read or write hold of a read/write
-- lock (see rwlock_common.lua for its data). (record.lua, clock.lua,
-- queue.lua and rwlock_common.lua are prepended.)
--
-- KEYS[1] lock hash (its channel too); the script builds the lock's
--         other keys (scripts.deriving): KEYS[2] fencing counter (touched
--         only for a new write hold with fencing; no TTL), KEYS[3] this
--         request's record, KEYS[4] owners (sorted set owner -> expiry),
--         KEYS[5] queue of waiting writers (see queue.lua), KEYS[6] their
--         deadlines, KEYS[7] readers-waiting marker (set by a refused
--         blocking read, TTL = heartbeat)
-- ARGV[1] owner token
-- ARGV[2] lease in milliseconds (> 0)
-- ARGV[3] request id (unique per owner)
-- ARGV[4] read holds this owner believes it has
-- ARGV[5] write holds this owner believes it has
-- ARGV[6] "1" to issue a fencing token on a new write hold, "0" not to
-- ARGV[7] "r" for a read hold, "w" for a write hold
-- ARGV[8] what a refused attempt needs (see q_args): whether it waits
--         (a refused writer then joins the queue), its heartbeat, wait id,
--         claim lease of a write grant, and record TTL
-- ARGV[9] optional: the owner's metadata (absent or '': none)
--
-- Reply: {1, fence} acquired (fence: the token of a new write hold with
--                   fencing, else 0), {1, fence, 1} when this request's
--                   record was written (see core.Sweeper),
--        {0, ms, us} refused: try again once ms have passed (the longest
--                   hold's remaining ms, 0 in its last millisecond; -1:
--                   unknown), or on a wake-up or grant (us: the server's
--                   time, see q_push),
--        {0, -3}    this request was aborted by its sender,
--        {0, -4}    re-entry refused: this owner's earlier holds are gone
--                   (lease lost), so its critical section is unsafe,
--        {0, -5}    write refused: this owner holds only read holds (an
--                   upgrade would deadlock).
--
-- A read is granted when nobody writes and no live writer waits (writer
-- preference), or at once when the owner already holds a read or the
-- write (re-entry, downgrade). A write is granted when no other owner
-- holds anything and no writer waits longer (writers are served in
-- arrival order), or at once when the owner already writes. Idempotent:
-- a retried request finds its record and answers as the first run did.
--
-- Nobody holding the lock or waiting for it (and no fencing token asked
-- for), the hold is granted at once, solo (see rwlock_common.lua): one
-- EXISTS of the lock, its owners, its queue and this request's record (an
-- abort's mark), then HSET and PEXPIRE, no clock. It writes no record: a
-- resend finds this owner's hold and takes it anew, and the abort of a
-- new hold drops any hold of the owner's.
local key, tok = KEYS[1], ARGV[1]
if ARGV[4] == '0' and ARGV[5] == '0' and (ARGV[7] == 'r' or ARGV[6] == '0') and
    redis.call('EXISTS', key, key .. ':owners', key .. ':queue', key .. ':r:' .. tok .. ':' .. ARGV[3]) == 0 then
  local meta = ARGV[9] or ''
  if ARGV[7] == 'w' then
    if meta == '' then
      redis.call('HSET', key, 'writer', tok, tok .. ':w', '1')
    else
      redis.call('HSET', key, 'writer', tok, tok .. ':w', '1', tok .. '|m', meta)
    end
  elseif meta == '' then
    redis.call('HSET', key, tok .. ':r', '1')
  else
    redis.call('HSET', key, tok .. ':r', '1', tok .. '|m', meta)
  end
  redis.call('PEXPIRE', key, ARGV[2])
  return {1, 0}
end
-- @keys
local done = replayed(KEYS[3], ARGV[3])
if done == 'x' then return {0, -3} end
if done then return {1, tonumber(done), 1} end

local fk, ok, qk, tk = KEYS[2], KEYS[4], KEYS[5], KEYS[6]
local lease = ARGV[2]
local haveR, haveW = tonumber(ARGV[4]), tonumber(ARGV[5])
local write = ARGV[7] == 'w'
local meta, fencing = ARGV[9] or '', ARGV[6]
local block, hb, wait, claim, rttl = q_args(ARGV[8])
local mine = q_entry(tok, wait, claim, fencing, meta)
local now = server_ms()
rw_shared(key, ok, now)
rw_expire(key, ok, now)

local r, w = rw_holds(key, tok)
if haveR == 0 and haveW == 0 and (r > 0 or w > 0) then
  if write and w > 0 and r == 0 then
    -- A write grant to this owner whose push it missed, or a write hold
    -- it lost track of: its new hold now, with the full lease and, with
    -- fencing, a new token.
    extend(key, lease)
    extend(ok, lease)
    redis.call('HSET', key, tok .. ':w', '1')
    set_meta(key, tok, meta)
    redis.call('ZADD', ok, now + lease, tok)
    extend(key, lease)
    extend(ok, lease)
    q_remove(qk, tk, mine)
    local fence = 0
    if fencing == '1' then
      fence = redis.call('INCR', fk)
      redis.call('HSET', key, 'fence', fence)
    end
    remember(KEYS[3], ARGV[3], fence, rttl)
    return {1, fence, 1}
  end
  -- Left over from an acquire whose outcome this owner never learned and
  -- could not undo (it counts nothing): drop it.
  rw_drop(key, ok, tok)
  r, w = 0, 0
  rw_fit(key, ok, now)
  rw_handoff(now, true)
end
if (haveR > 0 and r == 0) or (haveW > 0 and w == 0) then
  return {0, -4}
end
if write and r > 0 and w == 0 then
  return {0, -5}
end

local grantable
if write then
  if w > 0 then
    grantable = true
  else
    local others = redis.call('ZCARD', ok)
    if redis.call('ZSCORE', ok, tok) then others = others - 1 end
    local head = q_head(qk, tk, now)
    grantable = others == 0 and (not head or q_parse(head) == tok)
    if others == 0 and head and not grantable then
      -- Free, but an earlier writer goes first: it holds it now.
      rw_handoff(now, false)
    end
  end
else
  grantable = r > 0 or w > 0 or
    (redis.call('HEXISTS', key, 'writer') == 0 and not q_head(qk, tk, now))
end

if not grantable then
  if write and block then
    q_join(qk, tk, mine, now, hb)
  end
  if not write then
    if block then
      -- A reader waits: the release that admits readers wakes them.
      redis.call('SET', KEYS[7], '1', 'PX', hb)
    end
    if redis.call('EXISTS', ok) == 0 then
      -- Free, but a writer waits ahead of the readers: it holds it now.
      rw_handoff(now, false)
    end
  end
  local pttl = redis.call('PTTL', key)
  -- -2: the key expired since it was read (miniredis's clock runs on during
  -- a script; Redis's stands still): try again at once. -1: no TTL (not a
  -- key of relock's): unknown.
  if pttl == -2 then pttl = 0 end
  return {0, pttl, server_us()}
end

-- Both keys outlive the hold before it is written: a key about to expire
-- must not take it along (miniredis's clock runs on during a script).
extend(key, lease)
extend(ok, lease)
local fence = 0
if r == 0 and w == 0 then
  set_meta(key, tok, meta) -- a new owner
end
if write then
  if w == 0 and fencing == '1' then
    fence = redis.call('INCR', fk)
    redis.call('HSET', key, 'fence', fence)
  end
  redis.call('HSET', key, 'writer', tok, tok .. ':w', w + 1)
  q_remove(qk, tk, mine)
else
  if r == 0 and w == 0 then
    -- Readers are admitted now: no reader waits any more.
    redis.call('DEL', KEYS[7])
  end
  redis.call('HSET', key, tok .. ':r', r + 1)
end
redis.call('ZADD', ok, now + lease, tok)
extend(key, lease)
extend(ok, lease)
remember(KEYS[3], ARGV[3], fence, rttl)
return {1, fence, 1}
