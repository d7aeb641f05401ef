//go:build unix

package redistest

import (
	"net"
	"strconv"
	"syscall"
	"testing"
)

// ClosedAddr returns a loopback address that refuses connections until
// the end of t: its port is bound by t (no server of a test beside it can
// get it, as one did when the port was merely free) and not listened on.
func ClosedAddr(t testing.TB) string {
	t.Helper()
	fd, err := syscall.Socket(syscall.AF_INET, syscall.SOCK_STREAM, 0)
	if err != nil {
		t.Fatalf("ClosedAddr: socket: %v", err)
	}
	t.Cleanup(func() { _ = syscall.Close(fd) })
	if err := syscall.Bind(fd, &syscall.SockaddrInet4{Addr: [4]byte{127, 0, 0, 1}}); err != nil {
		t.Fatalf("ClosedAddr: bind: %v", err)
	}
	sa, err := syscall.Getsockname(fd)
	if err != nil {
		t.Fatalf("ClosedAddr: getsockname: %v", err)
	}
	return net.JoinHostPort("127.0.0.1", strconv.Itoa(sa.(*syscall.SockaddrInet4).Port))
}
