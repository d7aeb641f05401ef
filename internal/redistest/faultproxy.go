package redistest

import (
	"math/rand/v2"
	"net"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// FaultProxy is a TCP proxy in front of a server for chaos tests. On
// command it turns into a black hole (Blackhole: every byte is dropped
// both ways, connections stay open), delays every chunk of data by a random
// latency (Latency: order kept, chunks in flight together), or resets
// connections in the middle of commands (Resets). Unlike Proxy, a
// connection that one side closes is closed on the other side too, as the
// client's connection to a crashed server is.
type FaultProxy struct {
	Addr string

	target string
	l      net.Listener
	black  atomic.Bool
	lat    atomic.Pointer[[2]time.Duration]
	reset  atomic.Uint64 // probability, as math.Float64bits
	resets atomic.Int64

	wg     sync.WaitGroup
	mu     sync.Mutex
	links  map[*link]struct{}
	closed bool
}

// NewFaultProxy starts a proxy to addr, closed at the end of t (or by
// Close).
func NewFaultProxy(t testing.TB, addr string) *FaultProxy {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &FaultProxy{Addr: l.Addr().String(), target: addr, l: l, links: make(map[*link]struct{})}
	p.wg.Add(1)
	go p.accept()
	t.Cleanup(p.Close)
	return p
}

// Blackhole turns the black hole on or off.
func (p *FaultProxy) Blackhole(on bool) { p.black.Store(on) }

// Latency delays every chunk of data, either way, by a random duration in
// [lo, hi] (0, 0: none). Chunks keep their order on each connection.
func (p *FaultProxy) Latency(lo, hi time.Duration) {
	if hi <= 0 {
		p.lat.Store(nil)
		return
	}
	p.lat.Store(&[2]time.Duration{lo, max(lo, hi)})
}

// Resets makes the proxy reset connections with probability prob per chunk
// of data (0: never): a chunk from the server (a reply) is then dropped,
// after its command ran; a chunk from the client (commands) is cut in half,
// its first half sent, as a connection that breaks while a command is on
// the wire. Either way both ends see the connection reset.
func (p *FaultProxy) Resets(prob float64) { p.reset.Store(uint64(prob * (1 << 32))) }

// ResetCount is how many connections the proxy has reset.
func (p *FaultProxy) ResetCount() int64 { return p.resets.Load() }

// Close closes the proxy and every connection through it.
func (p *FaultProxy) Close() {
	p.mu.Lock()
	p.closed = true
	links := p.links
	p.links = map[*link]struct{}{}
	p.mu.Unlock()
	_ = p.l.Close()
	for l := range links {
		l.close(false)
	}
	p.wg.Wait()
}

func (p *FaultProxy) accept() {
	defer p.wg.Done()
	for {
		down, err := p.l.Accept()
		if err != nil {
			return
		}
		up, err := net.DialTimeout("tcp", p.target, time.Second)
		if err != nil {
			_ = down.Close()
			continue
		}
		l := &link{down: down, up: up}
		p.mu.Lock()
		if p.closed {
			p.mu.Unlock()
			l.close(false)
			return
		}
		p.links[l] = struct{}{}
		p.mu.Unlock()
		p.wg.Add(2)
		go p.pipe(l, up, down, false)
		go p.pipe(l, down, up, true)
	}
}

// link is one proxied connection: the client's end and the server's.
type link struct {
	down, up net.Conn
	once     sync.Once
}

// close closes both ends; with rst, as a reset (no orderly shutdown).
func (l *link) close(rst bool) {
	l.once.Do(func() {
		for _, c := range []net.Conn{l.down, l.up} {
			if tc, ok := c.(*net.TCPConn); ok && rst {
				_ = tc.SetLinger(0)
			}
			_ = c.Close()
		}
	})
}

type chunk struct {
	data []byte
	due  time.Time
}

// pipe copies src to dst through a queue, so that delayed chunks are in
// flight together; it closes the link when either end is done.
func (p *FaultProxy) pipe(l *link, dst, src net.Conn, fromServer bool) {
	defer p.wg.Done()
	q := make(chan chunk, 256)
	done := make(chan struct{})
	go func() {
		defer close(done)
		for c := range q {
			if d := time.Until(c.due); d > 0 {
				time.Sleep(d)
			}
			if _, err := dst.Write(c.data); err != nil {
				l.close(false)
				for range q {
				}
				return
			}
		}
	}()
	rst := false
	defer func() {
		close(q)
		<-done
		l.close(rst)
		p.mu.Lock()
		delete(p.links, l)
		p.mu.Unlock()
	}()
	buf := make([]byte, 32<<10)
	var last time.Time
	for {
		n, err := src.Read(buf)
		if n > 0 && !p.black.Load() {
			data := append([]byte(nil), buf[:n]...)
			due := time.Now()
			if lat := p.lat.Load(); lat != nil {
				due = due.Add(lat[0] + rand.N(lat[1]-lat[0]+1))
			}
			if due.Before(last) {
				due = last // keep the order
			}
			last = due
			if prob := p.reset.Load(); prob > 0 && rand.Uint64N(1<<32) < prob {
				// A reply is dropped; commands are cut in half.
				p.resets.Add(1)
				if !fromServer && n > 1 {
					q <- chunk{data: data[:n/2], due: due}
				}
				rst = true
				return
			}
			q <- chunk{data: data, due: due}
		}
		if err != nil {
			return
		}
	}
}
