-- clock: the server's time, prepended to the scripts that need it (fair,
-- rwlock, renew). Deadlines and expiries come from here, never from a
-- client's clock.

-- server_ms returns the server's time (TIME) in milliseconds.
local function server_ms()
  local t = redis.call('TIME')
  return tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
end
