-- rwlock_leave: a writer that gave up waiting stops counting as waiting,
-- and the readers held back by it are woken.
--
-- KEYS[1] waiting writers (sorted set of owner tokens)
-- ARGV[1] owner token
-- ARGV[2] wake-up channel
--
-- Reply: 1 if the owner was registered as waiting (now removed), else 0.
if redis.call('ZREM', KEYS[1], ARGV[1]) == 1 then
  redis.call('PUBLISH', ARGV[2], '*')
  return 1
end
return 0
