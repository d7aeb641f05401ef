-- renew: extend many holds in one round trip (the watchdog's batch), or
-- claim holds that a release granted with a short claim lease.
-- (clock.lua is prepended.)
--
-- KEYS         the keys of the holds, in order: one per hold, two for a
--              "w" or "s" hold (its hash, then its owners' sorted set)
-- ARGV[3i-2]   kind of hold i: "m" mutex (string), "h" hash of owner counts
--              (reentrant, fair), "w" read/write lock, "s" semaphore; "s"
--              may be followed by the permits the owner must have ("s3")
-- ARGV[3i-1]   owner token of hold i
-- ARGV[3i]     lease of hold i in milliseconds (> 0)
--
-- Reply: array, element i is 1 if hold i was extended, 0 if this owner no
-- longer holds that lock (it is gone or someone else's). A missing lock is
-- never recreated, and only this owner's own hold is extended.
--
-- It must never empty or delete a key: on a Redis Cluster it is sent
-- without the never-created key of the lock scripts (core.Keys.Absent), so
-- that it keeps following a migrating slot, and a key it emptied and then
-- touched again would abort it half-way at a migrating source.
local now -- server time in ms (clock.lua), read once when a "w" or "s" hold needs it
local out, k = {}, 1
for i = 1, #ARGV / 3 do
  local kind, tok, lease = ARGV[3 * i - 2], ARGV[3 * i - 1], tonumber(ARGV[3 * i])
  local need = 1
  if string.sub(kind, 1, 1) == 's' then
    need = tonumber(string.sub(kind, 2)) or 1
    kind = 's'
  end
  local key = KEYS[k]
  k = k + 1
  local ok = 0
  if kind == 'm' then
    local v = redis.call('GET', key)
    if v and (v == tok or string.sub(v, 1, #tok + 1) == tok .. ':') then
      redis.call('PEXPIRE', key, lease)
      ok = 1
    end
  elseif kind == 'h' then
    if redis.call('HEXISTS', key, tok) == 1 then
      redis.call('PEXPIRE', key, lease)
      ok = 1
    end
  elseif kind == 'w' or kind == 's' then
    -- Only this owner's expiry moves (see rwlock_common.lua and
    -- semaphore_common.lua); another owner's, even an expired one's, is
    -- left alone. Both keys then live at least as long as this owner's
    -- holds.
    local owners = KEYS[k]
    k = k + 1
    local e = redis.call('ZSCORE', owners, tok)
    local held
    if kind == 'w' then
      local f = redis.call('HMGET', key, tok .. ':r', tok .. ':w')
      held = f[1] or f[2]
    else
      held = tonumber(redis.call('HGET', key, tok) or 0) >= need
    end
    if e and held then
      now = now or server_ms()
      if tonumber(e) > now then
        redis.call('ZADD', owners, now + lease, tok)
        for _, kk in ipairs({key, owners}) do
          if redis.call('PTTL', kk) < lease then
            redis.call('PEXPIRE', kk, lease)
          end
        end
        ok = 1
      end
    end
  end
  out[i] = ok
end
return out
