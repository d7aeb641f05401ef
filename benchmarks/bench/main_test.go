package bench_test

import (
	"os"
	"testing"

	"github.com/relock-go/relock/internal/redistest"
)

// TestMain stops the Redis Cluster that TestCluster starts.
func TestMain(m *testing.M) { os.Exit(redistest.Main(m)) }
