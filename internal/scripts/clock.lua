-- clock: the server's time, prepended to the scripts that need it (fair,
-- rwlock, renew). Deadlines and expiries come from here, never from a
-- client's clock.

-- clock_us is the server's time (us) for the rest of the call, once read
-- (false before): a call reads TIME once at most. A call is atomic, so one
-- instant is its time, and TIME costs a call more than most commands (a
-- contended mutex acquisition read it 8 times in 3 calls). As a script,
-- this definition runs on every call; in the function library, each
-- function resets it before its body runs (scripts.buildLibrary).
local clock_us = false

-- server_us returns the server's time (TIME) in microseconds, as of the
-- call's first read.
local function server_us()
  if not clock_us then
    local t = redis.call('TIME')
    clock_us = tonumber(t[1]) * 1000000 + tonumber(t[2])
  end
  return clock_us
end

-- server_ms returns the server's time in milliseconds (see server_us).
local function server_ms()
  return math.floor(server_us() / 1000)
end
