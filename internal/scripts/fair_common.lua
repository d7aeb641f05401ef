-- fair_common: functions shared by the fair-lock scripts, prepended to each
-- of them (fair_acquire, fair_release, fair_abort, fair_leave), which all
-- take the queue as KEYS[qk] and the deadlines as KEYS[zk].
--
-- The queue is a list of waiting owner tokens in arrival order; the
-- deadlines are a sorted set owner -> server time (ms) by which that waiter
-- must show it is alive. Only dead waiters at the head are dropped, so each
-- dead waiter costs O(log n) once, however long the queue.

-- prune drops waiters whose deadline has passed (or who have none) from
-- the head of the queue, and returns the live head (or false).
local function prune(qk, zk, now)
  while true do
    local head = redis.call('LINDEX', qk, 0)
    if not head then return false end
    local dl = redis.call('ZSCORE', zk, head)
    if dl and tonumber(dl) > now then return head end
    redis.call('LPOP', qk)
    redis.call('ZREM', zk, head)
  end
end

-- wake_head tells the queue's live head, on its own channel, to try now.
local function wake_head(qk, zk, prefix)
  local head = prune(qk, zk, server_ms())
  if head then redis.call('PUBLISH', prefix .. head, '1') end
end

-- leave_queue removes an owner from the queue (one LREM: the work a leave
-- needs) and wakes the new head if the leaver was the head of a free lock.
local function leave_queue(lk, qk, zk, tok, prefix)
  if not redis.call('ZSCORE', zk, tok) then return end
  local was_head = redis.call('LINDEX', qk, 0) == tok
  redis.call('LREM', qk, 1, tok)
  redis.call('ZREM', zk, tok)
  if was_head and redis.call('EXISTS', lk) == 0 then
    wake_head(qk, zk, prefix)
  end
end

-- extend makes key live at least ms more (PTTL is negative without a TTL).
local function extend(key, ms)
  if redis.call('PTTL', key) < ms then
    redis.call('PEXPIRE', key, ms)
  end
end
