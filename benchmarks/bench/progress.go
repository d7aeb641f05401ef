package bench

import (
	"fmt"
	"io"
	"os"
	"sync"
	"time"
)

// progress shows which measurement runs, the time the run has taken and
// an estimate of what is left: one line rewritten in place on a terminal
// (ticking), one line per measurement otherwise.
type progress struct {
	w   io.Writer
	tty bool
	// est are the jobs' expected durations; the estimate of what is left
	// scales those still to run by how long the finished ones took over
	// their expectation.
	est []time.Duration

	mu       sync.Mutex
	begin    time.Time
	line     string
	i        int
	jobStart time.Time
	stop     chan struct{}
	done     chan struct{}
}

func newProgress(w io.Writer, est []time.Duration) *progress {
	p := &progress{w: w, est: est, begin: time.Now()}
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

// left estimates the time the run still takes, job i having run since
// p.jobStart.
func (p *progress) left(now time.Time) time.Duration {
	var doneEst, rest time.Duration
	for j, e := range p.est {
		switch {
		case j < p.i:
			doneEst += e
		case j > p.i:
			rest += e
		}
	}
	cur := p.est[p.i] - now.Sub(p.jobStart)
	f := 1.0
	if doneEst > 0 {
		f = min(4, max(0.5, float64(p.jobStart.Sub(p.begin))/float64(doneEst)))
	}
	return time.Duration(f*float64(rest)) + max(0, time.Duration(f*float64(cur)))
}

func (p *progress) start(i int, what string) {
	if p.w == nil {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	p.i, p.jobStart = i, time.Now()
	p.line = fmt.Sprintf("[%*d/%d] %s", len(fmt.Sprint(len(p.est))), i+1, len(p.est), what)
	if p.tty {
		p.drawLocked()
		return
	}
	fmt.Fprintf(p.w, "%s  (%s)\n", p.line, p.timesLocked())
}

// timesLocked is "12s elapsed, about 25s left".
func (p *progress) timesLocked() string {
	now := time.Now()
	return fmt.Sprintf("%s elapsed, about %s left", now.Sub(p.begin).Round(time.Second), p.left(now).Round(time.Second))
}

func (p *progress) drawLocked() {
	fmt.Fprintf(p.w, "\r\033[K%s  (%s)", p.line, p.timesLocked())
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
