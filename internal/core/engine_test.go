package core_test

import (
	"errors"
	"fmt"
	"io"
	"testing"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"

	"github.com/relock-go/relock/internal/core"
	"github.com/relock-go/relock/internal/redistest"
)

type reply = redistest.Reply

// IsRedisError: a refusal that go-redis does not send again is taken as
// proof that the command did not run; a reply it retries on may follow a
// try that ran and lost its reply.
func TestIsRedisError(t *testing.T) {
	for _, tc := range []struct {
		err  error
		want bool
	}{
		{reply("WRONGTYPE Operation against a key holding the wrong kind of value"), true},
		{reply("NOPERM User u has no permissions to run the 'evalsha' command"), true},
		{reply("RELOCK_CAPACITY 3"), true},
		{fmt.Errorf("semaphore: acquire: %w", reply("RELOCK_CAPACITY 3")), true},
		{reply("READONLY You can't write against a read only replica."), false},
		{reply("ERR Error running script (call to f_0e4b8d2c): @user_script:12: @user_script: 12: -READONLY You can't write against a read only replica."), false},
		{reply("LOADING Redis is loading the dataset in memory"), false},
		{reply("MASTERDOWN Link with MASTER is down and replica-serve-stale-data is set to 'no'."), false},
		{reply("CLUSTERDOWN The cluster is down"), false},
		{reply("NOREPLICAS Not enough good replicas to write."), false},
		{reply("ERR max number of clients reached"), false},
		{reply("TRYAGAIN Multiple keys request during rehashing of slot"), false},
		{reply("ASK 3999 127.0.0.1:6381"), false},
		{reply("MOVED 3999 127.0.0.1:6381"), false},
		{redis.Nil, false},
		{io.EOF, false},
		{errors.New("i/o timeout"), false},
	} {
		assert.Equal(t, tc.want, core.IsRedisError(tc.err), "%v", tc.err)
	}
}
