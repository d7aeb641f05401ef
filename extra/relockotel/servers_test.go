package relockotel_test

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"
)

// This module cannot import relock's internal/redistest, so here is the
// little of it these tests need: each test runs on a fresh miniredis and on
// one real redis-server that the test binary starts on a free loopback
// port. Without redis-server on PATH the real-Redis cases skip; with
// RELOCK_REQUIRE_REDIS=1 they fail.

func TestMain(m *testing.M) {
	code := m.Run()
	stopRedis()
	os.Exit(code)
}

// onServers runs f as subtests "miniredis" and "redis"; addr is the
// server's address.
func onServers(t *testing.T, f func(t *testing.T, addr string)) {
	t.Helper()
	t.Run("miniredis", func(t *testing.T) {
		m := miniredis.RunT(t)
		m.ClockTTL(true) // TTLs run down with the wall clock, as on Redis
		f(t, m.Addr())
	})
	t.Run("redis", func(t *testing.T) {
		f(t, realRedis(t))
	})
}

var (
	redisOnce sync.Once
	redisAddr string
	redisErr  error
	redisCmd  *exec.Cmd
	redisDir  string
)

// realRedis returns the address of the test binary's redis-server,
// starting it on first use, or skips (fails) t when there is none.
func realRedis(t testing.TB) string {
	t.Helper()
	redisOnce.Do(func() { redisAddr, redisErr = startRedis() })
	if redisErr != nil {
		if os.Getenv("RELOCK_REQUIRE_REDIS") == "1" {
			t.Fatalf("real redis-server required (RELOCK_REQUIRE_REDIS=1): %v", redisErr)
		}
		t.Skipf("skipping real-Redis case: %v", redisErr)
	}
	return redisAddr
}

func startRedis() (string, error) {
	bin, err := exec.LookPath("redis-server")
	if err != nil {
		return "", fmt.Errorf("redis-server not found on PATH")
	}
	if redisDir, err = os.MkdirTemp("", "relockotel-redis-"); err != nil {
		return "", err
	}
	// The port is picked, then bound by the server: another process may
	// take it in between, so try a few.
	for try := 0; ; try++ {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return "", err
		}
		port := l.Addr().(*net.TCPAddr).Port
		_ = l.Close()
		cmd := exec.Command(bin, "--port", strconv.Itoa(port), "--bind", "127.0.0.1",
			"--save", "", "--appendonly", "no", "--dir", redisDir)
		if err := cmd.Start(); err != nil {
			return "", err
		}
		addr := "127.0.0.1:" + strconv.Itoa(port)
		err = waitReady(addr)
		if err == nil {
			redisCmd = cmd
			return addr, nil
		}
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		if try == 4 {
			return "", fmt.Errorf("redis-server did not start: %w", err)
		}
	}
}

func waitReady(addr string) error {
	c := redis.NewClient(&redis.Options{Addr: addr, MaxRetries: -1})
	defer c.Close()
	deadline := time.Now().Add(5 * time.Second)
	for {
		err := c.Ping(context.Background()).Err()
		if err == nil || time.Now().After(deadline) {
			return err
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func stopRedis() {
	if redisCmd != nil {
		_ = redisCmd.Process.Kill()
		_ = redisCmd.Wait()
	}
	if redisDir != "" {
		_ = os.RemoveAll(redisDir)
	}
}
