package shard_test

import (
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/relock-go/relock/internal/shard"
)

// TestSlot checks Slot against slots Redis computes (CLUSTER KEYSLOT).
func TestSlot(t *testing.T) {
	for key, want := range map[string]int{
		"foo":                   12182,
		"bar":                   5061,
		"{user1000}.following":  3443,
		"{user1000}.followers":  3443,
		"foo{}{bar}":            8363,
		"foo{{bar}}zap":         4015,
		"foo{bar}{zap}":         5061,
		"relock:mutex:{orders}": shard.Slot("orders"),
		"123456789":             12739,
		"":                      0,
	} {
		assert.Equal(t, want, shard.Slot(key), "slot of %q", key)
	}
}
