package redistest

import "github.com/redis/go-redis/v9"

// Reply is an error reply of Redis as go-redis returns it (a redis.Error),
// for the tests that make one up.
type Reply string

var _ redis.Error = Reply("")

func (r Reply) Error() string { return string(r) }

// RedisError marks Reply as a redis.Error.
func (Reply) RedisError() {}
