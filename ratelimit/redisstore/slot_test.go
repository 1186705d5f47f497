package redisstore

import "testing"

func TestSlotOf(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		key  string
		want uint16
	}{
		// Values from the Redis Cluster specification and CLUSTER KEYSLOT.
		{"plain key", "123456789", 12739},
		{"hash tag", "{user1000}.following", slotOf("user1000")},
		{"tag of a store key", "sluice:rl:{ann}:login:l", slotOf("ann")},
		{"empty braces hash the whole name", "foo{}{bar}", crc16("foo{}{bar}") % 16384},
		{"first closing brace ends the tag", "p{a}b}:x", slotOf("a")},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			if got := slotOf(tt.key); got != tt.want {
				t.Errorf("slotOf(%q) = %d, want %d", tt.key, got, tt.want)
			}
		})
	}
}
