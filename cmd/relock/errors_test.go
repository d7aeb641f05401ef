package main

import (
	"net"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/relock-go/relock/internal/redistest"
)

// oneLineError checks a failed run: exit status code, nothing on stdout
// and one line on stderr, "relock: " then want.
func oneLineError(t *testing.T, r result, code int, want string) {
	t.Helper()
	assert.Equal(t, code, r.code)
	assert.Empty(t, r.stdout)
	assert.True(t, strings.HasPrefix(r.stderr, "relock: ") && strings.Count(r.stderr, "\n") == 1 && strings.HasSuffix(r.stderr, "\n"),
		"not one line: %q", r.stderr)
	assert.Contains(t, r.stderr, want)
}

func TestUsageErrors(t *testing.T) {
	redistest.Parallel(t)
	for _, tc := range []struct {
		args []string
		want string
	}{
		{nil, "missing subcommand"},
		{[]string{"bogus"}, `unknown subcommand "bogus"`},
		{[]string{"-bogus", "list"}, "flag provided but not defined: -bogus"},
		{[]string{"inspect"}, "inspect: missing NAME"},
		{[]string{"watch"}, "watch: missing NAME"},
		{[]string{"force-unlock"}, "force-unlock: missing NAME"},
		{[]string{"inspect", "a", "b"}, "inspect: too many arguments"},
		{[]string{"list", "-count", "2"}, "flag provided but not defined: -count"},
		{[]string{"-timeout", "0s", "list"}, "-timeout must be positive"},
		{[]string{"-redis", "http://localhost", "list"}, `bad -redis URL "http://localhost": redis: invalid URL scheme: http`},
		{[]string{"-redis", "redis://user:s3cret@localhost:x", "list"}, "bad -redis URL"},
		{[]string{"-redis", "redis://a:1/2,redis://b:1", "list"}, "bad -redis URL for a cluster"},
		{[]string{"-redis", "redis://localhost:6379", "inspect", "}x"}, "invalid lock name"},
		{[]string{"-redis", "redis://localhost:6379", "inspect", ""}, "invalid lock name: empty"},
	} {
		t.Run(strings.Join(tc.args, " "), func(t *testing.T) {
			r := relockCmd(t, "", tc.args...)
			oneLineError(t, r, 2, tc.want)
			assert.NotContains(t, r.stderr, "s3cret")
		})
	}
}

func TestHelp(t *testing.T) {
	redistest.Parallel(t)
	r := relockCmd(t, "", "-h")
	assert.Equal(t, 0, r.code)
	assert.Empty(t, r.stderr)
	for _, c := range commands {
		assert.Contains(t, r.stdout, "\n  "+c.name+" ")
	}
	for _, l := range strings.Split(r.stdout, "\n") {
		assert.LessOrEqual(t, len(l), 80, "%q", l)
	}
	r = relockCmd(t, "", "-redis", "redis://user:s3cret@localhost", "watch", "-h")
	assert.Equal(t, 0, r.code)
	assert.Contains(t, r.stdout, "usage: relock [flags] watch NAME")
	assert.Contains(t, r.stdout, "-count")
	assert.NotContains(t, r.stdout, "s3cret")
	assert.Contains(t, r.stdout, "ALIVE ", "watch's help explains inspect's columns")
	r = relockCmd(t, "", "inspect", "-h")
	assert.Equal(t, 0, r.code)
	for _, column := range []string{"TTL, EXPIRES", "HOLDS", "QUEUE", "ALIVE"} {
		assert.Contains(t, r.stdout, "\n  "+column+" ", "inspect's help explains its columns")
	}
	for _, l := range strings.Split(r.stdout, "\n") {
		assert.LessOrEqual(t, len(l), 80, "%q", l)
	}
}

// TestNoLock: a name without a lock is an error, not an empty answer.
func TestNoLock(t *testing.T) {
	redistest.Parallel(t)
	redistest.Run(t, func(t *testing.T, s *redistest.Server) {
		name := redistest.Name(t)
		oneLineError(t, relockCmd(t, "", "-redis", redisURL(s), "inspect", name), 1, `no lock named "`+name+`"`)
		oneLineError(t, relockCmd(t, "", "-redis", redisURL(s), "-json", "inspect", name), 1, `no lock named "`+name+`"`)
		oneLineError(t, relockCmd(t, "y\n", "-redis", redisURL(s), "force-unlock", name), 1, `no lock named "`+name+`"`)
	})
}

// TestUnreachable: a server that refuses connections, or accepts them and
// never answers, fails the command within about -timeout.
func TestUnreachable(t *testing.T) {
	redistest.Parallel(t)
	closed := freeAddr(t)
	silent, err := net.Listen("tcp", "127.0.0.1:0") // accepted by the kernel, never answered
	require.NoError(t, err)
	t.Cleanup(func() { silent.Close() })

	const timeout = 500 * time.Millisecond
	// go-redis v9.7 reports the dial's own error; newer releases retry a
	// refused dial until the deadline, which the command then names.
	for _, tc := range []struct {
		name, addr string
		want       []string
	}{
		{"refused", closed, []string{"connection refused", "no answer from the server within -timeout"}},
		{"silent", silent.Addr().String(), []string{"i/o timeout", "no answer from the server within -timeout"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			for _, args := range [][]string{{"inspect", "x"}, {"list"}, {"force-unlock", "x"}} {
				r := relockCmd(t, "", append([]string{"-redis", "redis://" + tc.addr, "-timeout", timeout.String()}, args...)...)
				oneLineError(t, r, 1, "")
				assert.True(t, strings.Contains(r.stderr, tc.want[0]) || strings.Contains(r.stderr, tc.want[1]),
					"%q says neither %q nor %q", r.stderr, tc.want[0], tc.want[1])
				assert.Less(t, r.took, 2*timeout)
			}
		})
	}
}

// freeAddr returns a loopback address that refuses connections.
func freeAddr(t *testing.T) string { return redistest.ClosedAddr(t) }
