package bench

import (
	"fmt"
	"io"
	"os"
	"sync"
	"time"
)

// progress shows which measurement runs: one line rewritten in place on a
// terminal (with the time it has run), one line per measurement otherwise.
type progress struct {
	w     io.Writer
	tty   bool
	total int

	mu    sync.Mutex
	line  string
	since time.Time
	stop  chan struct{}
	done  chan struct{}
}

func newProgress(w io.Writer, total int) *progress {
	p := &progress{w: w, total: total}
	if w == nil {
		return p
	}
	if f, ok := w.(*os.File); ok {
		if fi, err := f.Stat(); err == nil && fi.Mode()&os.ModeCharDevice != 0 {
			p.tty = true
		}
	}
	if p.tty {
		p.stop, p.done = make(chan struct{}), make(chan struct{})
		go p.tick()
	}
	return p
}

func (p *progress) start(i int, what string) {
	if p.w == nil {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	p.line = fmt.Sprintf("[%*d/%d] %s", len(fmt.Sprint(p.total)), i+1, p.total, what)
	p.since = time.Now()
	if p.tty {
		p.drawLocked()
		return
	}
	fmt.Fprintln(p.w, p.line)
}

func (p *progress) drawLocked() {
	fmt.Fprintf(p.w, "\r\033[K%s  %.1fs", p.line, time.Since(p.since).Seconds())
}

func (p *progress) tick() {
	defer close(p.done)
	t := time.NewTicker(250 * time.Millisecond)
	defer t.Stop()
	for {
		select {
		case <-p.stop:
			return
		case <-t.C:
			p.mu.Lock()
			if p.line != "" {
				p.drawLocked()
			}
			p.mu.Unlock()
		}
	}
}

func (p *progress) finish() {
	if !p.tty {
		return
	}
	close(p.stop)
	<-p.done
	fmt.Fprint(p.w, "\r\033[K")
}
