-- record: helpers prepended to the scripts that change a lock.
--
-- A request record is a string "reqid|result" kept briefly under the
-- owner's record key. go-redis resends a command whose reply timed out, so
-- a script can run twice (in either order with its resend): a script that
-- finds its own request id answers from the record instead of applying the
-- change again. "x" as the result marks a request its sender aborted.

-- replayed returns the recorded result of request id, or nil.
local function replayed(key, id)
  local rec = redis.call('GET', key)
  if not rec then return nil end
  local rid, res = string.match(rec, '^([^|]*)|(.*)$')
  if rid == id then return res end
  return nil
end

-- remember records the result of request id for ttl milliseconds.
local function remember(key, id, result, ttl)
  redis.call('SET', key, id .. '|' .. result, 'PX', ttl)
end

-- owns reports whether a mutex value (token, or token..":"..fence) is tok's.
local function owns(v, tok)
  return v == tok or string.sub(v, 1, #tok + 1) == tok .. ':'
end
