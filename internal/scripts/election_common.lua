-- election_common: what the election scripts share, prepended to each of
-- them after record.lua, clock.lua and queue.lua.
--
-- An election is a fair lock whose hold is the leadership. Its keys, all
-- under the election's {name} hash tag, in this order in every election
-- script but election_observe.lua:
--
-- KEYS[1] the leadership: a hash, leader's owner token -> 1 (as a fair
--         lock's), with 'fence' (the term), 'wait' (the wait id of the
--         call that was made leader), 'fp' (the leader's fingerprint),
--         'value', 'rev' (how many Proclaims changed the value in this
--         term) and 'since' (server time in us when the term began);
--         TTL = lease
-- KEYS[2] the term counter (INCR, no TTL: a fencing counter)
-- KEYS[3] the caller's request record (record.lua)
-- KEYS[4] the candidates' queue, KEYS[5] their deadlines (queue.lua;
--         every entry's fencing flag is 1: every leadership has a term)
-- KEYS[6] the candidates' values: hash, wait id -> fingerprint (8 hex
--         digits) .. value; TTL as the queue's
-- KEYS[7] the log: sorted set of the last E_LOG_MAX changes, seq ->
--         "<seq>|<kind>|<term>|<rev>|<since us>|<fp>|<value>", kind L a
--         new leader (rev 0), P a Proclaim, V a vacancy (term: the one that
--         ended; since: when it was found; no fp, no value); seq is the
--         server's time in us when it was logged, made greater than the
--         seq before it. It lives a log TTL after its last change.
--
-- Every change of leader or value is logged and published ("*") on the
-- observers' channel, so that observers read every change in order.

local E_LOG_MAX = 100

-- e_num formats a number as an integer (never "1.7e+15").
local function e_num(n)
  return string.format('%.0f', tonumber(n))
end

-- e_last returns the kind and term of the log's last entry, or nil.
local function e_last()
  local r = redis.call('ZRANGE', KEYS[7], -1, -1)
  if #r == 0 then return nil end
  local kind, term = string.match(r[1], '^[^|]*|(.)|([^|]*)|')
  return kind, term
end

-- e_log appends an entry to the log, trims it to E_LOG_MAX entries and
-- makes it live ttl ms more.
local function e_log(ttl, kind, term, rev, since, fp, value)
  local seq = server_us()
  local r = redis.call('ZRANGE', KEYS[7], -1, -1, 'WITHSCORES')
  if #r > 0 and tonumber(r[2]) >= seq then seq = tonumber(r[2]) + 1 end
  local s = e_num(seq)
  redis.call('ZADD', KEYS[7], s, s .. '|' .. kind .. '|' .. e_num(term) .. '|' .. e_num(rev) .. '|' ..
    e_num(since) .. '|' .. fp .. '|' .. value)
  if redis.call('ZCARD', KEYS[7]) > E_LOG_MAX then
    local old = redis.call('ZRANGE', KEYS[7], -E_LOG_MAX - 1, -E_LOG_MAX - 1, 'WITHSCORES')
    redis.call('ZREMRANGEBYSCORE', KEYS[7], '-inf', old[2])
  end
  extend(KEYS[7], tonumber(ttl))
end

-- e_publish tells the observers that the log changed.
local function e_publish(channel)
  redis.call('PUBLISH', channel, '*')
end

-- e_ended logs the end of the last term if the leadership is gone (the
-- caller checked) without its end logged: its lease ran out, or its key
-- was deleted by other means. It returns whether it logged.
local function e_ended(ttl)
  local kind, term = e_last()
  if kind == 'V' then return false end
  if not kind then
    -- The log expired: the last term is the counter's, if any.
    term = tonumber(redis.call('GET', KEYS[2]) or 0)
    if term == 0 then return false end
  end
  e_log(ttl, 'V', term, 0, server_us(), '', '')
  return true
end

-- e_lead makes tok (its call wait) the leader with v (fingerprint ..
-- value) for ms, in a new term, logs it and returns the term.
local function e_lead(ttl, tok, wait, v, ms)
  local term = redis.call('INCR', KEYS[2])
  local since = e_num(server_us())
  local fp, value = string.sub(v, 1, 8), string.sub(v, 9)
  redis.call('HSET', KEYS[1], tok, 1, 'fence', term, 'wait', wait, 'fp', fp, 'value', value,
    'rev', 0, 'since', since)
  redis.call('PEXPIRE', KEYS[1], ms)
  e_log(ttl, 'L', term, 0, since, fp, value)
  return term
end

-- e_forget removes queue entry e's value.
local function e_forget(e)
  local _, wait = q_parse(e)
  redis.call('HDEL', KEYS[6], wait)
end

-- e_head returns the live head of the queue (dropping dead candidates
-- and their values), or false.
local function e_head()
  return q_head(KEYS[4], KEYS[5], server_ms(), e_forget)
end

-- e_grant makes the candidate of queue entry e (the live head) the
-- leader with its claim lease, which its first renewal turns into its
-- full lease, and pushes the grant on its own channel (prefix .. token).
local function e_grant(e, prefix, ttl)
  q_remove(KEYS[4], KEYS[5], e)
  local tok, wait, claim = q_parse(e)
  local v = redis.call('HGET', KEYS[6], wait) or ''
  redis.call('HDEL', KEYS[6], wait)
  local term = e_lead(ttl, tok, wait, v, claim)
  q_push(prefix .. tok, wait, term)
end

-- e_vacate follows the end of term (its key deleted by the caller): the
-- live head of the queue leads now, or the vacancy is logged.
local function e_vacate(term, prefix, ttl)
  local head = e_head()
  if head then
    e_grant(head, prefix, ttl)
  else
    e_log(ttl, 'V', term, 0, server_us(), '', '')
  end
end
