package inspect

// globMatch reports whether s matches the Redis glob pattern, with the
// rules of Redis's stringmatchlen (what SCAN MATCH uses): "*" matches any
// bytes, "?" one byte, "[abc]", "[^abc]" and "[a-z]" a byte in (or not in)
// a set, and "\" makes the next byte literal. Every token but "*" matches
// one byte, so backtracking to the last "*" is enough: O(len(pattern) *
// len(s)) at worst.
func globMatch(pattern, s string) bool {
	p, i := 0, 0
	star, mark := -1, 0
	for i < len(s) {
		if p < len(pattern) && pattern[p] == '*' {
			star, mark = p, i
			p++
			continue
		}
		if p < len(pattern) {
			if n, ok := matchOne(pattern[p:], s[i]); ok {
				p, i = p+n, i+1
				continue
			}
		}
		if star < 0 {
			return false
		}
		mark++
		p, i = star+1, mark
	}
	for p < len(pattern) && pattern[p] == '*' {
		p++
	}
	return p == len(pattern)
}

// matchOne matches c against the one-byte token that p starts with (not
// "*"), and returns the token's length.
func matchOne(p string, c byte) (int, bool) {
	switch p[0] {
	case '?':
		return 1, true
	case '[':
		return matchClass(p, c)
	case '\\':
		if len(p) >= 2 {
			return 2, p[1] == c
		}
	}
	return 1, p[0] == c
}

// matchClass matches c against the class p starts with ("[...]"), and
// returns the class's length; an unclosed class runs to the end of the
// pattern, as in Redis.
func matchClass(p string, c byte) (int, bool) {
	j := 1
	not := j < len(p) && p[j] == '^'
	if not {
		j++
	}
	match := false
	for j < len(p) && p[j] != ']' {
		switch {
		case p[j] == '\\' && j+1 < len(p):
			j++
			match = match || p[j] == c
		case j+2 < len(p) && p[j+1] == '-':
			lo, hi := p[j], p[j+2]
			if lo > hi {
				lo, hi = hi, lo
			}
			match = match || (lo <= c && c <= hi)
			j += 2
		default:
			match = match || p[j] == c
		}
		j++
	}
	if j < len(p) {
		j++ // the "]"
	}
	return j, match != not
}
