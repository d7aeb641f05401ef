package redistest

import (
	"bytes"
	"net"
	"sync"
	"sync/atomic"
	"testing"
)

// Proxy is a TCP proxy in front of a server that can turn into a black
// hole: while blackholed it keeps every connection open but forwards no
// byte either way, as a network that drops packets (commands hang until
// the client's read timeout instead of failing at once).
type Proxy struct {
	Addr string

	l      net.Listener
	black  atomic.Bool
	drop   atomic.Pointer[[]byte] // server-to-client data containing it is dropped
	hold   atomic.Pointer[holdback]
	wg     sync.WaitGroup
	mu     sync.Mutex
	conns  []net.Conn
	closed bool
}

// NewProxy starts a proxy to addr, closed at the end of t.
func NewProxy(t testing.TB, addr string) *Proxy {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &Proxy{Addr: l.Addr().String(), l: l}
	p.wg.Add(1)
	go p.accept(addr)
	t.Cleanup(p.close)
	return p
}

// Blackhole turns the black hole on or off.
func (p *Proxy) Blackhole(on bool) { p.black.Store(on) }

type holdback struct {
	pattern []byte
	gate    chan struct{}
}

// HoldBack delays every chunk of server-to-client data containing pattern
// (and what follows it on that connection) until the returned func is
// called: a push that is late on its pub/sub connection.
func (p *Proxy) HoldBack(pattern []byte) (release func()) {
	hb := &holdback{pattern: pattern, gate: make(chan struct{})}
	p.hold.Store(hb)
	return func() {
		if p.hold.CompareAndSwap(hb, nil) {
			close(hb.gate)
		}
	}
}

// Drop makes the proxy drop every chunk of server-to-client data that
// contains pattern (nil: none), as a pub/sub connection that loses a
// message: a pushed grant ("g|"), say, while other traffic flows.
func (p *Proxy) Drop(pattern []byte) {
	if pattern == nil {
		p.drop.Store(nil)
		return
	}
	p.drop.Store(&pattern)
}

func (p *Proxy) accept(addr string) {
	defer p.wg.Done()
	for {
		down, err := p.l.Accept()
		if err != nil {
			return
		}
		up, err := net.Dial("tcp", addr)
		if err != nil {
			_ = down.Close()
			continue
		}
		p.mu.Lock()
		if p.closed {
			// Accepted while close ran: close has closed the conns it
			// knew of already.
			p.mu.Unlock()
			_ = down.Close()
			_ = up.Close()
			return
		}
		p.conns = append(p.conns, down, up)
		p.wg.Add(2)
		p.mu.Unlock()
		go p.pipe(up, down, false)
		go p.pipe(down, up, true)
	}
}

// pipe copies src to dst until either fails; then it closes both, so that
// the pipe of the other direction ends too (a client that hung up leaves
// the server's side idle, not closed).
func (p *Proxy) pipe(dst, src net.Conn, fromServer bool) {
	defer p.wg.Done()
	defer func() {
		_ = src.Close()
		_ = dst.Close()
	}()
	buf := make([]byte, 32<<10)
	for {
		n, err := src.Read(buf)
		if drop := p.drop.Load(); fromServer && drop != nil && bytes.Contains(buf[:n], *drop) {
			continue
		}
		if hb := p.hold.Load(); fromServer && hb != nil && bytes.Contains(buf[:n], hb.pattern) {
			<-hb.gate
		}
		if n > 0 && !p.black.Load() {
			if _, werr := dst.Write(buf[:n]); werr != nil {
				return
			}
		}
		if err != nil {
			return
		}
	}
}

func (p *Proxy) close() {
	if hb := p.hold.Swap(nil); hb != nil {
		// A test that failed before releasing what it held back.
		select {
		case <-hb.gate:
		default:
			close(hb.gate)
		}
	}
	_ = p.l.Close()
	p.mu.Lock()
	p.closed = true
	for _, c := range p.conns {
		_ = c.Close()
	}
	p.mu.Unlock()
	p.wg.Wait()
}
