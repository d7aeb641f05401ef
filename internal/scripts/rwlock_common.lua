-- rwlock_common: functions shared by the read/write-lock scripts, prepended
-- (after record.lua and clock.lua) to each of them (rwlock_acquire, rwlock_release,
-- rwlock_abort, rwlock_count).
--
-- The lock is one hash with these fields:
--   mode        "write" while some owner has a :w field, else "read"
--   <token>:r   that owner's read hold count
--   <token>:w   that owner's write hold count (one owner at most)
--   <token>:e   that owner's hold expiry, server time in ms: its read and
--               write holds count only while this lies in the future, so a
--               crashed reader's share expires on its own
-- and a TTL that follows the longest live hold (the largest :e), so the
-- hash disappears with its last hold.

-- holds returns owner tok's live read and write counts: 0, 0 when it has
-- none or its expiry has passed.
local function holds(key, tok, now)
  local f = redis.call('HMGET', key, tok .. ':r', tok .. ':w', tok .. ':e')
  if not f[3] or tonumber(f[3]) <= now then
    return 0, 0
  end
  return tonumber(f[1] or 0), tonumber(f[2] or 0)
end

-- extend makes the hash live at least lease ms: after a hold was added or
-- renewed, the longest live hold is the longer of the current TTL and the
-- new lease (no need to look at the other holds).
local function extend(key, lease)
  if redis.call('PTTL', key) < lease then
    redis.call('PEXPIRE', key, lease)
  end
end

-- settle drops the holds of owners whose expiry has passed, sets mode, and
-- shrinks the TTL to the longest remaining hold, or deletes the hash when
-- none remains; it returns whether the hash remains. It reads the whole
-- hash, O(number of owners): acceptable because the handles holding one
-- lock at once are few, and it runs only when a handle's holds end (its
-- last release, an abort) or an acquire is refused, never on a plain grant.
local function settle(key, now)
  local all = redis.call('HGETALL', key)
  local owners = {}
  for i = 1, #all, 2 do
    local tok, k = string.match(all[i], '^(.+):([rwe])$')
    if tok then
      local o = owners[tok]
      if not o then
        o = {}
        owners[tok] = o
      end
      o[k] = all[i + 1]
    end
  end
  local last, write = 0, false
  for tok, o in pairs(owners) do
    local e = tonumber(o.e or 0)
    if e <= now or not (o.r or o.w) then
      redis.call('HDEL', key, tok .. ':r', tok .. ':w', tok .. ':e')
    else
      if e > last then last = e end
      if o.w then write = true end
    end
  end
  if last == 0 then
    redis.call('DEL', key)
    return false
  end
  redis.call('HSET', key, 'mode', write and 'write' or 'read')
  redis.call('PEXPIRE', key, last - now)
  return true
end

