-- force: helpers of the force-unlock scripts (an operator's tool),
-- prepended after the lock type's own helpers.
--
-- A force-unlock is idempotent per request: the reply of its first run is
-- kept under the request's own record key (a string
-- relock:<kind>:{name}:f:<request id>, with a TTL), and a second run of
-- the same request (go-redis resending it after a lost reply, or the
-- handle after a Cluster's refusal while the slot moves) answers from it
-- instead of deleting a hold taken since. A request either deletes the
-- lock whatever its holders ("*"), or only while its holders are exactly
-- the owners it names (those an operator was shown): the same set of
-- owners, each counted once, whatever their hold counts, modes or permits
-- now; its waiters do not count.
--
-- Replies: 1 deleted, 0 nothing was held (nothing changed), -1 held by
-- other owners than those named (nothing changed).

-- force_replayed returns the reply recorded under rk by an earlier run of
-- the request, or nil.
local function force_replayed(rk)
  local r = redis.call('GET', rk)
  if not r then return nil end
  if string.sub(r, 1, 1) == '!' then return redis.error_reply(string.sub(r, 2)) end
  return tonumber(r)
end

-- force_done records reply r of the request under rk for ttl ms and
-- returns it.
local function force_done(rk, r, ttl)
  redis.call('SET', rk, r, 'PX', ttl)
  return r
end

-- force_refuse records the error reply msg under rk for ttl ms and
-- returns it (nothing was changed).
local function force_refuse(rk, msg, ttl)
  redis.call('SET', rk, '!' .. msg, 'PX', ttl)
  return redis.error_reply(msg)
end

-- force_owners reads the owners the request names, from ARGV[i] on: nil
-- for "*" (whatever the holders), else the set of their tokens and its
-- size.
local function force_owners(i)
  if ARGV[i] == '*' then return nil, 0 end
  local want, n = {}, 0
  for j = i, #ARGV do
    if not want[ARGV[j]] then
      want[ARGV[j]] = true
      n = n + 1
    end
  end
  return want, n
end

-- force_check compares holders, the lock's holders now (a list, each
-- once), with the owners the request names (want, n: see force_owners).
-- It returns nil when the request goes on (whatever the holders, or
-- exactly those named), else its reply: 0 nobody holds the lock, -1
-- others do.
local function force_check(holders, want, n)
  if not want then return nil end
  if #holders == 0 then return 0 end
  if #holders == n then
    local same = true
    for _, tok in ipairs(holders) do
      if not want[tok] then same = false end
    end
    if same then return nil end
  end
  return -1
end

-- force_exclusive returns the holders of an exclusive lock at key (one
-- owner at most): a mutex's string (is_string: record.lua's m_value), or a reentrant or fair lock's hash of owner ->
-- count. A hash's fields are not listed (no HKEYS for relock's ACL user):
-- being exclusive, it is held by the owner named if that owner has a
-- field, else by someone else ("?").
local function force_exclusive(key, is_string, want, n)
  if is_string then
    local v = redis.call('GET', key)
    if not v then return {} end
    return {string.match(v, '^[^:|]*')}
  end
  if redis.call('EXISTS', key) == 0 then return {} end
  if n == 1 then
    for tok in pairs(want) do
      if redis.call('HEXISTS', key, tok) == 1 then return {tok} end
    end
  end
  return {'?'}
end
