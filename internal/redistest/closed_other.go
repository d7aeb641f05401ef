//go:build !unix

package redistest

import (
	"net"
	"testing"
)

// ClosedAddr returns a loopback address that nothing listens on (a port
// that was free: a server started meanwhile may get it).
func ClosedAddr(t testing.TB) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("ClosedAddr: %v", err)
	}
	addr := l.Addr().String()
	_ = l.Close()
	return addr
}
