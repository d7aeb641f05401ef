package redistest

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// Managed is a real redis-server of one test that the test can crash and
// start again on the same address, with its data files or without them: a
// restart with persistence (start it with "--appendonly", "yes",
// "--appendfsync", "always") or a restart that lost everything.
type Managed struct {
	Server
	dir  string
	args []string
	log  string

	mu  sync.Mutex
	cmd *exec.Cmd // nil while crashed
}

// StartManaged starts a redis-server of t's own on a free loopback port,
// with its files in dir (a new temporary directory if dir is ""; /dev/shm
// keeps appendfsync cheap) and args appended to its command line, and stops
// it at the end of t. Like Real, it skips t when no redis-server can be had,
// or fails t with RELOCK_REQUIRE_REDIS=1.
func StartManaged(t testing.TB, dir string, args ...string) *Managed {
	t.Helper()
	if dir == "" {
		dir = t.TempDir()
	}
	cmd, addr, err := launch(dir, args...)
	if err != nil {
		unavailable(t, err)
	}
	m := &Managed{Server: Server{Addr: addr}, dir: dir, args: args, log: filepath.Join(dir, "redis.log"), cmd: cmd}
	t.Cleanup(func() { _ = m.Crash() })
	return m
}

// Crash kills the server at once (SIGKILL: no shutdown, no last save) and
// waits until it is gone. Crashing a crashed server does nothing.
func (m *Managed) Crash() error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.cmd == nil {
		return nil
	}
	err := m.cmd.Process.Kill()
	_ = m.cmd.Wait()
	m.cmd = nil
	return err
}

// Freeze stops the running server's process (SIGSTOP): it keeps its
// connections and answers nothing until Thaw, as a host that hangs.
func (m *Managed) Freeze() error { return m.signal(syscall.SIGSTOP) }

// Thaw lets a frozen server run again (SIGCONT).
func (m *Managed) Thaw() error { return m.signal(syscall.SIGCONT) }

func (m *Managed) signal(sig syscall.Signal) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.cmd == nil {
		return errors.New("redistest: signal to a crashed server")
	}
	return m.cmd.Process.Signal(sig)
}

// Wipe removes the crashed server's data files (append-only files and RDB
// snapshot), so that the next Start begins with no data, as after a restart
// without persistence.
func (m *Managed) Wipe() error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.cmd != nil {
		return errors.New("redistest: wipe of a running server")
	}
	return errors.Join(
		os.RemoveAll(filepath.Join(m.dir, "appendonlydir")),
		os.RemoveAll(filepath.Join(m.dir, "dump.rdb")))
}

// Start starts the crashed server again on the same port, with the same
// arguments, from whatever its files hold, and waits until it answers
// (loading its data may take a while).
func (m *Managed) Start() error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.cmd != nil {
		return errors.New("redistest: start of a running server")
	}
	_, port, err := net.SplitHostPort(m.Addr)
	if err != nil {
		return err
	}
	var lastErr error
	// The port was ours a moment ago; another process may still take it
	// in between, or the old listener linger: a few tries.
	for try := 0; try < 5; try++ {
		cmd := exec.Command("redis-server", append([]string{
			"--port", port, "--bind", "127.0.0.1",
			"--save", "", "--appendonly", "no",
			"--enable-debug-command", "local",
			"--dir", m.dir, "--logfile", m.log}, m.args...)...)
		dieWithParent(cmd)
		if err := cmd.Start(); err != nil {
			return err
		}
		if lastErr = waitLoaded(m.Addr, 30*time.Second); lastErr == nil {
			m.cmd = cmd
			return nil
		}
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		time.Sleep(50 * time.Millisecond)
	}
	return fmt.Errorf("redis-server did not restart on %s: %v (log: %s)", m.Addr, lastErr, tail(m.log))
}

// Restart crashes the server and starts it again on the same port; with
// wipe, its data files are removed in between (everything is lost).
func (m *Managed) Restart(wipe bool) error {
	if err := m.Crash(); err != nil {
		return err
	}
	if wipe {
		if err := m.Wipe(); err != nil {
			return err
		}
	}
	return m.Start()
}

// waitLoaded waits until the server at addr answers PING (a server still
// loading its data answers LOADING), for at most d.
func waitLoaded(addr string, d time.Duration) error {
	c := redis.NewClient(&redis.Options{Addr: addr, MaxRetries: -1})
	defer c.Close()
	deadline := time.Now().Add(d)
	for {
		err := c.Ping(context.Background()).Err()
		if err == nil {
			return nil
		}
		if time.Now().After(deadline) {
			return err
		}
		time.Sleep(20 * time.Millisecond)
	}
}
