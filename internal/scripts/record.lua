-- record: helpers prepended to the scripts that change a lock.
--
-- A request record is kept briefly so that a script can run twice (go-redis
-- resends a command whose reply timed out; a handle resends a request
-- whose outcome it never learned), in either order with its resend: a
-- script that finds its request's record answers from it instead of
-- applying the change again. The lock types keep one record per request,
-- at <lock>:r:<token>:<request id> (scripts.RequestRecord), which the
-- owner deletes once it has the reply (core.Sweeper); the latch and the
-- election one per owner, at <lock>:r:<token>, which the owner's next
-- request replaces. A record is a string "reqid|result" ("x" as the result
-- marks a request its sender aborted), except that a final release keeps
-- the lock itself as its record (release_record).

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

-- release_record ends the hold at lk by renaming lk, whatever its type,
-- to rk, the final release's record: it frees the lock, and its resend
-- finds the record, in one call (a DEL and a SET cost Redis much more),
-- and the record lives as long as the lease had left (the lock's TTL
-- moves with it), or ttl ms when ttl is given (not nil or '').
local function release_record(lk, rk, ttl)
  redis.call('RENAME', lk, rk)
  if ttl and ttl ~= '' then redis.call('PEXPIRE', rk, ttl) end
end

-- owns reports whether a mutex value (m_value) is tok's.
local function owns(v, tok)
  if v == tok then return true end
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
