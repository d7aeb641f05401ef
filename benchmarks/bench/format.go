package bench

import (
	"fmt"
	"strconv"
	"strings"
	"time"
)

// fmtDur formats d with three significant digits at most: 812ns, 45.2µs,
// 1.34ms, 135ms, 2.10s.
func fmtDur(d time.Duration) string {
	switch {
	case d <= 0:
		return "0"
	case d < time.Microsecond:
		return fmt.Sprintf("%dns", d.Nanoseconds())
	case d < time.Millisecond:
		return sig3(float64(d)/float64(time.Microsecond)) + "µs"
	case d < time.Second:
		return sig3(float64(d)/float64(time.Millisecond)) + "ms"
	}
	return sig3(d.Seconds()) + "s"
}

// sig3 formats v (>= 1) with about three significant digits.
func sig3(v float64) string {
	switch {
	case v < 10:
		return strconv.FormatFloat(v, 'f', 2, 64)
	case v < 100:
		return strconv.FormatFloat(v, 'f', 1, 64)
	}
	return strconv.FormatFloat(v, 'f', 0, 64)
}

// fmtNum formats v with thousands separators and no decimals (v >= 100),
// or with up to three significant digits.
func fmtNum(v float64) string {
	if v < 0 {
		return "-" + fmtNum(-v)
	}
	if v < 100 {
		if v == float64(int64(v)) {
			return strconv.FormatInt(int64(v), 10)
		}
		if v < 1 {
			return strconv.FormatFloat(v, 'f', 3, 64)
		}
		return sig3(v)
	}
	return group(int64(v + 0.5))
}

// group formats n with thousands separators.
func group(n int64) string {
	s := strconv.FormatInt(n, 10)
	neg := strings.HasPrefix(s, "-")
	s = strings.TrimPrefix(s, "-")
	var b strings.Builder
	for i, c := range s {
		if i > 0 && (len(s)-i)%3 == 0 {
			b.WriteByte(',')
		}
		b.WriteRune(c)
	}
	if neg {
		return "-" + b.String()
	}
	return b.String()
}

func itoa(n int) string { return strconv.Itoa(n) }

// ratio formats a ratio as "1.07x".
func ratio(v float64) string {
	if v > 0 && v < 0.01 {
		return strconv.FormatFloat(v, 'g', 2, 64) + "x"
	}
	return strconv.FormatFloat(v, 'f', 2, 64) + "x"
}

// fmtBytes formats a byte count with a binary-free decimal unit: 812 B,
// 45.2 kB, 13.4 MB, 1.20 GB.
func fmtBytes(v float64) string {
	switch {
	case v < 1000:
		return fmtNum(v) + " B"
	case v < 1e6:
		return sig3(v/1e3) + " kB"
	case v < 1e9:
		return sig3(v/1e6) + " MB"
	}
	return sig3(v/1e9) + " GB"
}

// count formats n things: "1 waiter", "1,000 waiters".
func count(n int, thing string) string {
	if n == 1 {
		return "1 " + thing
	}
	return group(int64(n)) + " " + thing + "s"
}
