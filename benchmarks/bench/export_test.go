package bench

// Internals for the tests of package bench_test.
var (
	KeyClass = keyClass
	Wrap     = wrap
)
