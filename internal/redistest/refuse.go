package redistest

import (
	"context"
	"fmt"
	"net"
	"sync"
	"sync/atomic"
	"syscall"

	"github.com/redis/go-redis/v9"
)

// Refuser is a go-redis Dialer (Options sets it) that dials the server
// until Refuse, which closes the connections it made and refuses every
// dial after ("connection refused", matching syscall.ECONNREFUSED), as a
// Redis whose process is gone, until Accept.
type Refuser struct {
	mu    sync.Mutex
	conns []net.Conn
	off   atomic.Bool
}

// Options makes o dial through r (a Client's opts).
func (r *Refuser) Options(o *redis.Options) { o.Dialer = r.Dial }

// Dial is the Dialer.
func (r *Refuser) Dial(ctx context.Context, network, addr string) (net.Conn, error) {
	if r.off.Load() {
		return nil, &net.OpError{Op: "dial", Net: network, Err: fmt.Errorf("connect: %w", syscall.ECONNREFUSED)}
	}
	c, err := (&net.Dialer{}).DialContext(ctx, network, addr)
	if err == nil {
		r.mu.Lock()
		r.conns = append(r.conns, c)
		r.mu.Unlock()
	}
	return c, err
}

// Refuse closes the connections made so far and refuses every dial
// until Accept.
func (r *Refuser) Refuse() {
	r.off.Store(true)
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, c := range r.conns {
		_ = c.Close()
	}
	r.conns = nil
}

// Accept lets dials through again.
func (r *Refuser) Accept() { r.off.Store(false) }
