package watchdog

// Exited returns a channel closed when w's goroutine has exited.
func Exited(w *Watchdog) <-chan struct{} { return w.done }
