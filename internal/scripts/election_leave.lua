-- election_leave: a candidate gives up (its ctx ended, or its Client
-- closed) and leaves the queue at once; a leadership granted to it that
-- it did not take goes to the next candidate, and so does a free one it
-- was first in line for. (record.lua, clock.lua, queue.lua and
-- election_common.lua are prepended.)
--
-- KEYS[1..7] see election_common.lua
-- ARGV[1] owner token
-- ARGV[2] the candidate's wait id
-- ARGV[3] "1" if the owner leads by its own count, else "0"
-- ARGV[4] prefix of the candidates' own channels
-- ARGV[5] the candidate's claim lease (ms), as in its queue entry
-- ARGV[6] the observers' channel
-- ARGV[7] log TTL in milliseconds (> 0)
--
-- Reply: 1.
local lk, tok, prefix, ttl = KEYS[1], ARGV[1], ARGV[4], ARGV[7]
q_remove(KEYS[4], KEYS[5], q_entry(tok, ARGV[2], ARGV[5], '1'))
redis.call('HDEL', KEYS[6], ARGV[2])
local logged = false
if ARGV[3] == '0' and redis.call('HEXISTS', lk, tok) == 1 then
  -- Made leader, never taken.
  local term = redis.call('HGET', lk, 'fence')
  redis.call('DEL', lk)
  e_vacate(term, prefix, ttl)
  logged = true
elseif redis.call('EXISTS', lk) == 0 then
  logged = e_ended(ttl)
  local head = e_head()
  if head then
    e_grant(head, prefix, ttl)
    logged = true
  end
end
if logged then e_publish(ARGV[6]) end
return 1
