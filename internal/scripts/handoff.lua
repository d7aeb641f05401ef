-- handoff: what the mutex and reentrant scripts share (after record.lua,
-- clock.lua and queue.lua): the lock is free again (released, aborted,
-- left by a waiter it was granted to), so the next owner is decided.
--
-- These locks barge, as sync.Mutex does: a release wakes one waiter per
-- client and any of them, or a newcomer, may win. Once the longest waiter
-- has waited longer than STARVE_MS, the lock is handed to it directly
-- instead (granted with its claim lease, and the grant pushed), and
-- newcomers may not take a free lock while it starves. Nobody queued:
-- nothing to do, not even a publish.

-- STARVE_MS is how long the longest waiter may wait before a release
-- hands the lock to it: core.StarvationThreshold (a test checks that they
-- agree). The mutex and reentrant scripts take another threshold as an
-- optional last argument (package redlock's: never, as a grant on one
-- master is no majority), read by starve_ms.
local STARVE_MS = 2

-- starve_ms returns the threshold in a script's optional argument a, or
-- STARVE_MS.
local function starve_ms(a)
  return tonumber(a) or STARVE_MS
end

-- starving returns the live head of the queue qk and the server time in
-- ms if that head has waited longer than starve ms, else false (and the
-- time, or nil when nobody is queued: the server's clock is read only
-- then, as TIME costs a script more than most commands), then whether a
-- live waiter is queued (starving or not). An EXISTS first, unless the
-- caller saw qk exist (queued): it costs an uncontended call less than a
-- ZRANGE of the missing queue would.
local function starving(qk, tk, starve, queued)
  if not queued and redis.call('EXISTS', qk) == 0 then return false, nil, false end
  local us, now = server_us(), server_ms()
  local head, arrival = q_head(qk, tk, now)
  if head and arrival <= us - starve * 1000 then return head, now, true end
  return false, now, head ~= false
end

-- grant_to makes the waiter of entry e the owner of the free lock lk,
-- with its claim lease, and pushes the grant on channel. string says
-- whether lk is a mutex (a string) or a reentrant lock (a hash).
local function grant_to(e, lk, fk, qk, tk, channel, string)
  q_remove(qk, tk, e)
  local tok, wait, claim, fencing, meta = q_parse(e)
  local fence = 0
  if fencing == '1' then fence = redis.call('INCR', fk) end
  if string then
    redis.call('SET', lk, m_value(tok, fence, meta), 'PX', claim)
  else
    redis.call('HSET', lk, tok, '1')
    if fence > 0 then redis.call('HSET', lk, 'fence', fence) end
    set_meta(lk, tok, meta)
    redis.call('PEXPIRE', lk, claim)
  end
  q_push(channel, wait, fence)
end

-- handoff decides who gets the free lock lk (its keys built from lk, its
-- channel lk itself): the head starving for more than starve ms, or
-- whichever waiter wins once woken; nothing when nobody waits. queued:
-- the caller saw lk's queue exist (a release checks that itself, so that
-- an uncontended one calls no helper for it: see mutex_release.lua).
local function handoff(lk, string, starve, queued)
  local qk, tk = lk .. ':queue', lk .. ':timeouts'
  local head, _, live = starving(qk, tk, starve, queued)
  if head then
    grant_to(head, lk, lk .. ':fence', qk, tk, lk, string)
  elseif live then
    redis.call('PUBLISH', lk, '1')
  end
end
