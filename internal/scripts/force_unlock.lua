-- force_unlock: delete a lock whatever its owner (an operator's tool), and
-- wake every waiter.
--
-- KEYS[1] lock key
-- ARGV[1] wake-up channel
--
-- Reply: 1 if there was a lock to delete, else 0.
if redis.call('DEL', KEYS[1]) == 1 then
  redis.call('PUBLISH', ARGV[1], '*')
  return 1
end
return 0
