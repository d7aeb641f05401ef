package notify

// IsRefusal is isRefusal, for the external tests.
var IsRefusal = isRefusal
