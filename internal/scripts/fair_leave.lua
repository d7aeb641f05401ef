-- fair_leave: a waiter gives up (its ctx ended) and leaves the queue at
-- once; if it was the head of a free lock, the next waiter is woken.
-- (clock.lua and fair_common.lua are prepended.)
--
-- KEYS[1] lock hash
-- KEYS[2] queue
-- KEYS[3] waiter deadlines
-- ARGV[1] owner token
-- ARGV[2] prefix of the waiters' own wake-up channels
--
-- Reply: 1.
leave_queue(KEYS[1], KEYS[2], KEYS[3], ARGV[1], ARGV[2])
return 1
