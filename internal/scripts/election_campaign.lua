-- election_campaign: one attempt of a candidate to become the leader,
-- strictly in queue order. (record.lua, clock.lua, queue.lua and
-- election_common.lua are prepended.)
--
-- KEYS[1..7] see election_common.lua: leadership, term counter, request
--         record, queue, deadlines, candidates' values, log
-- ARGV[1] owner token
-- ARGV[2] lease in milliseconds (> 0)
-- ARGV[3] request id (unique per owner)
-- ARGV[4] record TTL in milliseconds (> 0)
-- ARGV[5] heartbeat timeout in milliseconds (> 0)
-- ARGV[6] the caller's wait id
-- ARGV[7] claim lease of a grant to this caller, in milliseconds
-- ARGV[8] prefix of the candidates' own channels
-- ARGV[9] the observers' channel
-- ARGV[10] log TTL in milliseconds (> 0)
-- ARGV[11] the caller's fingerprint (8 hex digits) .. its value
--
-- Reply: {1, term} the caller leads; {0, pttl, us} not yet (pttl: the
-- leader's remaining ms, 0 when it was just granted to an earlier
-- candidate; us: the server's time, see q_push); {0, -3} request aborted.
--
-- The caller joins the queue (once) and refreshes its deadline and value
-- (its heartbeat); a free leadership goes to the live head of the queue.
-- A leadership that ended without a script knowing (its lease ran out)
-- has its vacancy logged here, before the next leader.
local done = replayed(KEYS[3], ARGV[3])
if done == 'x' then return {0, -3} end
if done then return {1, tonumber(done)} end

local lk, qk, tk, vk = KEYS[1], KEYS[4], KEYS[5], KEYS[6]
local tok, lease, wait, prefix, obs, ttl = ARGV[1], ARGV[2], ARGV[6], ARGV[8], ARGV[9], ARGV[10]
local mine = q_entry(tok, wait, ARGV[7], '1')

if redis.call('HEXISTS', lk, tok) == 1 then
  local term
  if redis.call('HGET', lk, 'wait') == wait then
    -- Granted to this call, whose push it missed: its term goes on.
    term = tonumber(redis.call('HGET', lk, 'fence'))
  else
    -- A leadership of this owner that it lost track of (declared lost
    -- here, or an acquire it could not undo): a new term now.
    term = e_lead(ttl, tok, wait, ARGV[11], lease)
    e_publish(obs)
  end
  q_remove(qk, tk, mine)
  redis.call('HDEL', vk, wait)
  redis.call('PEXPIRE', lk, lease)
  remember(KEYS[3], ARGV[3], term, ARGV[4])
  return {1, term}
end

if redis.call('EXISTS', lk) == 0 then
  local logged = e_ended(ttl)
  local head = e_head()
  if head and q_parse(head) ~= tok then
    -- Free, but an earlier candidate goes first: it leads now.
    e_grant(head, prefix, ttl)
    logged = true
  else
    -- Without a live head the queue is empty (q_head dropped the dead
    -- entries with their values), so the caller has no entry to remove.
    if head then
      q_remove(qk, tk, head)
      e_forget(head)
      if head ~= mine then
        q_remove(qk, tk, mine)
        redis.call('HDEL', vk, wait)
      end
    end
    local term = e_lead(ttl, tok, wait, ARGV[11], lease)
    e_publish(obs)
    remember(KEYS[3], ARGV[3], term, ARGV[4])
    return {1, term}
  end
  if logged then e_publish(obs) end
end

local hb = tonumber(ARGV[5])
q_join(qk, tk, mine, server_ms(), hb)
redis.call('HSET', vk, wait, ARGV[11])
extend(vk, hb)
local pttl = redis.call('PTTL', lk)
if pttl < 0 then pttl = 0 end
return {0, pttl, server_us()}
