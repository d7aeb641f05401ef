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

-- owns reports whether a mutex value (m_value) is tok's.
local function owns(v, tok)
  local c = string.sub(v, #tok + 1, #tok + 1)
  return string.sub(v, 1, #tok) == tok and (c == '' or c == ':' or c == '|')
end

-- m_value is a mutex's value: the owner's token, then ":" and its fencing
-- token (with fencing), then "|" and its metadata (relock.WithMetadata,
-- when it gave some). Tokens never contain ':' or '|'.
local function m_value(tok, fence, meta)
  local v = tok
  if fence and fence > 0 then v = v .. ':' .. fence end
  if meta and meta ~= '' then v = v .. '|' .. meta end
  return v
end

-- set_meta keeps owner tok's metadata, when it gave some, in the field
-- "<tok>|m" of the lock's hash lk (a field that no token can be).
local function set_meta(lk, tok, meta)
  if meta and meta ~= '' then redis.call('HSET', lk, tok .. '|m', meta) end
end
