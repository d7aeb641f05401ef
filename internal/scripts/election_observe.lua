-- election_observe: read the leadership and the changes logged after a
-- point (Leader, Observe). It changes nothing. (record.lua, clock.lua,
-- queue.lua and election_common.lua are prepended.)
--
-- KEYS[1] the leadership (see election_common.lua)
-- KEYS[2] the log
-- ARGV[1] "" for no log entries, else the seq after which to return them
--
-- Reply: {us, last, pttl, leader, entries}: the server's time in us, the
-- log's last seq ("" when it is empty), the leadership's remaining ms (<
-- 0 when there is none), the leadership {term, rev, since us, fp, value}
-- ({} when there is none), and the log entries after ARGV[1], in order
-- (see election_common.lua).
local f = redis.call('HMGET', KEYS[1], 'fence', 'rev', 'since', 'fp', 'value')
local leader = {}
if f[1] then
  leader = {f[1], f[2] or '0', f[3] or '0', f[4] or '', f[5] or ''}
end
local pttl = redis.call('PTTL', KEYS[1])
local last = redis.call('ZRANGE', KEYS[2], -1, -1, 'WITHSCORES')
local seq = ''
if #last > 0 then seq = e_num(last[2]) end
local entries = {}
if ARGV[1] ~= '' then
  entries = redis.call('ZRANGEBYSCORE', KEYS[2], '(' .. ARGV[1], '+inf')
end
return {e_num(server_us()), seq, pttl, leader, entries}
