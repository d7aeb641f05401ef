package notify_test

import (
	"context"
	"strings"
	"testing"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/relock-go/relock/internal/notify"
	"github.com/relock-go/relock/internal/redistest"
)

// TestIsRefusal classifies the errors a real redis-server sends on a
// pub/sub connection: a user without the channel or without SUBSCRIBE is
// refused subscriptions; a user without PING (the receiver's health
// check) is not (review: pushes were switched off for good).
func TestIsRefusal(t *testing.T) {
	redistest.Parallel(t)
	redistest.RunReal(t, func(t *testing.T, s *redistest.Server) {
		ctx := context.Background()
		admin := s.Admin(t)
		cases := []struct {
			rules   []any
			cmd     func(ps *redis.PubSub) error
			refusal bool
		}{
			{[]any{"&other:*", "+@all"}, func(ps *redis.PubSub) error { return ps.Subscribe(ctx, "relock:x") }, true},
			{[]any{"&*", "+@all", "-subscribe"}, func(ps *redis.PubSub) error { return ps.Subscribe(ctx, "relock:x") }, true},
			{[]any{"&*", "+@all", "-ping"}, func(ps *redis.PubSub) error { return ps.Ping(ctx) }, false},
		}
		for i, c := range cases {
			user := strings.NewReplacer(".", "-", "/", "-").Replace(redistest.Name(t)) + "-" + string(rune('a'+i))
			rules := append([]any{"ACL", "SETUSER", user, "on", ">pw", "resetchannels"}, c.rules...)
			require.NoError(t, admin.Do(ctx, rules...).Err())
			t.Cleanup(func() { admin.Do(context.Background(), "ACL", "DELUSER", user) })
			rdb := s.Client(t, func(o *redis.Options) { o.Username, o.Password = user, "pw" })
			ps := rdb.Subscribe(ctx)
			err := c.cmd(ps)
			if err == nil {
				_, err = ps.Receive(ctx) // the reply to a command sent on a pub/sub connection
			}
			require.Error(t, err, "rules %v", c.rules)
			assert.Equal(t, c.refusal, notify.IsRefusal(err), "rules %v: %v", c.rules, err)
			_ = ps.Close()
		}
	})
}
