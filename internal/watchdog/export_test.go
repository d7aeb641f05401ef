package watchdog

// Exited returns a channel closed when w's goroutine has exited.
func Exited(w *Watchdog) <-chan struct{} { return w.done }

// StopTimer stops h's deadline timer, as if it fired late (this process
// starved of CPU): h is declared lost at its deadline only by Gone.
func StopTimer(w *Watchdog, h *Hold) {
	w.mu.Lock()
	defer w.mu.Unlock()
	h.timer.Stop()
}
