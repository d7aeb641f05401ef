-- fair_common: what the fair-lock scripts share, prepended to each of them
-- after record.lua, clock.lua and queue.lua.

-- grant_head makes the live head of the queue the owner of the free lock
-- lk, with the claim lease it asked for (its first renewal sets the full
-- lease), and pushes the grant on the head's own channel. It returns
-- whether there was a waiter to grant to.
local function grant_head(lk, fk, qk, tk, prefix, now)
  local tok, wait, claim, fencing, meta = q_grant(qk, tk, now)
  if not tok then return false end
  redis.call('HSET', lk, tok, 1)
  set_meta(lk, tok, meta)
  local fence = 0
  if fencing == '1' then
    fence = redis.call('INCR', fk)
    redis.call('HSET', lk, 'fence', fence)
  end
  redis.call('PEXPIRE', lk, claim)
  q_push(prefix .. tok, wait, fence)
  return true
end
