-- queue: the waiters of a lock that hands itself over (a release grants
-- it to the longest waiter), prepended after record.lua and clock.lua to
-- the scripts of every lock type.
--
-- A queue is two sorted sets under the lock's hash tag: qk, entry ->
-- arrival (server time in microseconds, so arrival order), and tk, entry
-- -> the server time (ms) by which that waiter must show it is alive
-- again. An entry is "<token>|<wait id>|<claim ms>|<fencing 0/1>", then
-- "|<metadata>" when the owner gave some (relock.WithMetadata): the owner,
-- the blocking call that waits (grants are addressed to it), the lease a
-- grant gets until the waiter claims it, whether a grant issues a fencing
-- token, and what a grant records as the owner's metadata. Every call of a waiter refreshes its deadline;
-- dead waiters are dropped when they reach the head, each once, so no
-- call scans the queue. Both sets live as long as their longest-lived
-- waiter (their TTL only ever grows).

-- extend makes key live at least ms more (PTTL is negative without a TTL);
-- ms may be a string (an argument: cheaper to pass on than a number).
local function extend(key, ms)
  if redis.call('PTTL', key) < tonumber(ms) then
    redis.call('PEXPIRE', key, ms)
  end
end

-- q_entry builds an entry (meta may be nil or '': none).
local function q_entry(tok, wait, claim, fencing, meta)
  local e = tok .. '|' .. wait .. '|' .. claim .. '|' .. fencing
  if meta and meta ~= '' then e = e .. '|' .. meta end
  return e
end

-- q_parse splits an entry into token, wait id, claim ms, fencing and
-- metadata ('' when none), all strings: Lua reads a string as a number
-- in arithmetic, and redis.call formats a number argument at a cost
-- (Redis 7.0: "%.17g") that a string is spared.
local function q_parse(e)
  local tok, wait, claim, fencing, meta = string.match(e, '^([^|]*)|([^|]*)|([^|]*)|([^|]*)|?(.*)$')
  return tok, wait, claim, fencing, meta
end

-- q_head drops dead waiters from the head and returns the live head entry
-- with its arrival (us), or false. dropped, if given, is called with each
-- entry dropped (for what a lock type keeps beside its waiters).
local function q_head(qk, tk, now, dropped)
  while true do
    local h = redis.call('ZRANGE', qk, 0, 0, 'WITHSCORES')
    if #h == 0 then return false end
    local dl = redis.call('ZSCORE', tk, h[1])
    if dl and tonumber(dl) > now then return h[1], tonumber(h[2]) end
    redis.call('ZREM', qk, h[1])
    redis.call('ZREM', tk, h[1])
    if dropped then dropped(h[1]) end
  end
end

-- q_join enqueues entry e (keeping its place if it is queued already) and
-- gives it hb ms to show it is alive again.
local function q_join(qk, tk, e, now, hb)
  redis.call('ZADD', qk, 'NX', server_us(), e)
  redis.call('ZADD', tk, now + hb, e)
  extend(qk, hb)
  extend(tk, hb)
end

-- q_remove takes entry e out of the queue.
local function q_remove(qk, tk, e)
  redis.call('ZREM', qk, e)
  redis.call('ZREM', tk, e)
end

-- q_grant takes the live head of the queue out of it and returns its
-- token, wait id, claim ms, fencing and metadata, or false when nobody
-- waits; the
-- caller makes it the owner and pushes the grant (q_push).
local function q_grant(qk, tk, now)
  local e = q_head(qk, tk, now)
  if not e then return false end
  q_remove(qk, tk, e)
  return q_parse(e)
end

-- q_push tells waiter wait, on channel, that it holds the lock now, with
-- its fencing token and the server's time of the grant (us): the waiter
-- takes only a grant newer than its latest refusal (a refused reply
-- carries the refusal's time), so a late push of a grant that has since
-- lapsed is never taken for a live one.
local function q_push(channel, wait, fence)
  redis.call('PUBLISH', channel, string.format('g|%s|%d|%.0f', wait, fence, server_us()))
end

-- q_args splits what an acquire sends for the case that it is refused
-- (one argument, as every parameter costs a call; only a refused or
-- contended acquire reads it): "<block>|<heartbeat ms>|<wait id>|<claim
-- ms>|<record TTL ms>", block "1" when the caller waits if refused (it
-- then joins the queue), "0" for a single try (whose wait id is '').
local function q_args(s)
  local block, hb, wait, claim, rttl = string.match(s, '^([^|]*)|([^|]*)|([^|]*)|([^|]*)|([^|]*)$')
  return block == '1', hb, wait, claim, rttl
end
