package redistest

import (
	"crypto/tls"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"testing"
)

// StartServer starts a real redis-server of t's own (for a second Ring
// shard, say) on a free loopback port, with args appended to its command
// line, and stops it at the end of t. Like Real, it skips t when no
// redis-server can be had, or fails t with RELOCK_REQUIRE_REDIS=1.
func StartServer(t testing.TB, args ...string) *Server {
	t.Helper()
	cmd, addr, err := launch(t.TempDir(), args...)
	if err != nil {
		unavailable(t, err)
	}
	t.Cleanup(func() { stop(cmd) })
	return &Server{Addr: addr}
}

// launch starts redis-server from PATH on a free loopback port, with its
// files in dir, and waits until it answers. Ports are picked then bound by
// the server, so another process can take one in between: it tries a few.
func launch(dir string, args ...string) (*exec.Cmd, string, error) {
	return launchOn(dir, nil, func(port int) []string {
		return []string{"--port", strconv.Itoa(port)}
	}, args...)
}

// launchOn is launch with the listening arguments of a port given by
// listen, and a client of tlsCfg (nil: plain TCP) to wait for its PING.
func launchOn(dir string, tlsCfg *tls.Config, listen func(port int) []string, args ...string) (*exec.Cmd, string, error) {
	bin, err := exec.LookPath("redis-server")
	if err != nil {
		return nil, "", fmt.Errorf("redis-server not found on PATH")
	}
	logfile := filepath.Join(dir, "redis.log")
	var lastErr error
	for try := 0; try < 5; try++ {
		port, err := freePort()
		if err != nil {
			return nil, "", err
		}
		argv := append(listen(port), "--bind", "127.0.0.1",
			"--save", "", "--appendonly", "no",
			"--enable-debug-command", "local",
			"--dir", dir, "--logfile", logfile)
		cmd := exec.Command(bin, append(argv, args...)...)
		dieWithParent(cmd)
		if err := cmd.Start(); err != nil {
			return nil, "", err
		}
		addr := "127.0.0.1:" + strconv.Itoa(port)
		if lastErr = waitReady(addr, tlsCfg, cmd.Process.Pid); lastErr == nil {
			return cmd, addr, nil
		}
		stop(cmd)
	}
	return nil, "", fmt.Errorf("redis-server did not start: %v (log: %s)", lastErr, tail(logfile))
}

// stop kills the process of cmd and waits until it is gone.
func stop(cmd *exec.Cmd) {
	_ = cmd.Process.Kill()
	_ = cmd.Wait()
}

// unavailable skips t, or fails it with RELOCK_REQUIRE_REDIS=1, because no
// real redis-server could be had.
func unavailable(t testing.TB, err error) {
	t.Helper()
	if os.Getenv("RELOCK_REQUIRE_REDIS") == "1" {
		t.Fatalf("real redis-server required (RELOCK_REQUIRE_REDIS=1): %v", err)
	}
	t.Skipf("skipping real-Redis case: %v (install redis-server, or set RELOCK_REQUIRE_REDIS=1 to fail instead)", err)
}
