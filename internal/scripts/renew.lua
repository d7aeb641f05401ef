-- renew: extend many holds in one round trip (the watchdog's batch).
--
-- KEYS[i]      lock key of hold i
-- ARGV[1]      lease in milliseconds (> 0)
-- ARGV[2i]     kind of hold i: "m" mutex (string), "h" hash of owner counts
--              (reentrant, fair), "w" read/write lock
-- ARGV[2i+1]   owner token of hold i
--
-- Reply: array, element i is 1 if hold i was extended, 0 if this owner no
-- longer holds that lock (it is gone or someone else's). A missing lock is
-- never recreated, and only this owner's own hold is extended.
local lease = tonumber(ARGV[1])
local now -- server time in ms (clock.lua), read once when a "w" hold needs it
local out = {}
for i, key in ipairs(KEYS) do
  local kind, tok = ARGV[2 * i], ARGV[2 * i + 1]
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
  elseif kind == 'w' then
    -- Only this owner's expiry moves (see rwlock_common.lua); another
    -- owner's, even an expired one's, is left alone. The hash then lives
    -- at least as long as this owner's holds.
    local f = redis.call('HMGET', key, tok .. ':e', tok .. ':r', tok .. ':w')
    if f[1] and (f[2] or f[3]) then
      now = now or server_ms()
      if tonumber(f[1]) > now then
        redis.call('HSET', key, tok .. ':e', now + lease)
        if redis.call('PTTL', key) < lease then
          redis.call('PEXPIRE', key, lease)
        end
        ok = 1
      end
    end
  end
  out[i] = ok
end
return out
