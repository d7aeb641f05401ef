-- renew: extend many holds in one round trip (the watchdog's batch), or
-- claim holds that a release granted with a short claim lease, or extend
-- one hold (a handle's Extend).
-- (clock.lua is prepended.)
--
-- KEYS         the keys of the holds, in order: one per hold, two for a
--              "w" or "s" hold (its hash, then its owners' sorted set,
--              absent while the lock is solo: see rwlock_common.lua);
--              after them, on a Cluster, the watchdog may declare one
--              more, which never exists and which the script never reads
--              (watchdog.Hold.Absent: a migrating slot then refuses the
--              call at both masters)
-- ARGV[3i-2]   kind of hold i: "m" mutex (string), "h" hash of owner counts
--              (reentrant, fair), "w" read/write lock, "s" semaphore; then
--              "=" to set the lease exactly (an Extend of a fixed lease,
--              which may shorten it); then, for "s", the permits the owner
--              must have ("s3", "s=3")
-- ARGV[3i-1]   owner token of hold i
-- ARGV[3i]     lease of hold i in milliseconds (> 0)
--
-- Reply: array, element i is 1 if hold i was extended, 0 if this owner no
-- longer holds that lock (it is gone or someone else's). A missing lock is
-- never recreated, and only this owner's own hold is extended. Without
-- "=", a hold's remaining lease is never shortened: a renewal that was
-- sent before an Extend to a longer lease, and runs after it, leaves that
-- longer lease in place.
--
-- It must never empty or delete a key: on a Redis Cluster the watchdog
-- sends it without the never-created key of the lock scripts
-- (core.Keys.Absent), so that it keeps following a migrating slot while
-- its declared keys are all on one side, and a key it emptied and then
-- touched again would abort it half-way at a migrating source. (A solo
-- "w" or "s" hold declares its owners' set, which does not exist: Redis
-- refuses that renewal while the slot migrates, so the watchdog sends it
-- alone in its call, see watchdog.group; and so it sends the renewal of
-- a hold that a first renewal on a Cluster found gone, asked again with
-- the never-created key declared: see watchdog.Hold.suspect.)
local now -- server time in ms (clock.lua), read once when a "w" or "s" hold needs it
local out, k = {}, 1
for i = 1, #ARGV / 3 do
  local spec, tok, ls = ARGV[3 * i - 2], ARGV[3 * i - 1], ARGV[3 * i]
  local lease = tonumber(ls) -- ls, the string, is cheaper to pass on
  local kind, exact, rest = string.match(spec, '^(.)(=?)(.*)$')
  exact = exact == '='
  local need = tonumber(rest) or 1
  local key = KEYS[k]
  k = k + 1
  local ok = 0
  if kind == 'm' then
    local v = redis.call('GET', key)
    local c = v and string.sub(v, #tok + 1, #tok + 1)
    if v and string.sub(v, 1, #tok) == tok and (c == '' or c == ':' or c == '|') then
      if exact or redis.call('PTTL', key) < lease then
        redis.call('PEXPIRE', key, ls)
      end
      ok = 1
    end
  elseif kind == 'h' then
    if redis.call('HEXISTS', key, tok) == 1 then
      if exact or redis.call('PTTL', key) < lease then
        redis.call('PEXPIRE', key, ls)
      end
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
    if not e and held and redis.call('EXISTS', owners) == 0 then
      -- A solo lock (see rwlock_common.lua): its one owner's holds
      -- expire with the hash.
      if exact or redis.call('PTTL', key) < lease then
        redis.call('PEXPIRE', key, ls)
      end
      ok = 1
    elseif e and held then
      now = now or server_ms()
      if tonumber(e) > now then
        if exact or now + lease > tonumber(e) then
          redis.call('ZADD', owners, now + lease, tok)
        end
        for _, kk in ipairs({key, owners}) do
          if redis.call('PTTL', kk) < lease then
            redis.call('PEXPIRE', kk, ls)
          end
        end
        ok = 1
      end
    end
  end
  out[i] = ok
end
return out
