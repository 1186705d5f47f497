package store

import (
	"testing"
	"time"
)

func TestRebind(t *testing.T) {
	t.Parallel()
	tests := []struct{ name, in, want string }{
		{"none", "SELECT 1", "SELECT 1"},
		{"several", "UPDATE t SET a = ?, b = ? WHERE id = ?", "UPDATE t SET a = $1, b = $2 WHERE id = $3"},
		{"in a string literal", "SELECT '?', ? FROM t WHERE x = 'it''s ?'", "SELECT '?', $1 FROM t WHERE x = 'it''s ?'"},
		{"in an identifier", `SELECT "a?b" FROM t WHERE c = ?`, `SELECT "a?b" FROM t WHERE c = $1`},
		{"in a comment", "SELECT ? -- why?\nFROM t WHERE a = ?", "SELECT $1 -- why?\nFROM t WHERE a = $2"},
		{"comment at the end", "SELECT ? -- why?", "SELECT $1 -- why?"},
	}
	for _, tt := range tests {
		if got := rebind(DialectPostgres, tt.in); got != tt.want {
			t.Errorf("%s: rebind(postgres, %q) = %q, want %q", tt.name, tt.in, got, tt.want)
		}
		if got := rebind(DialectSQLite, tt.in); got != tt.in {
			t.Errorf("%s: rebind(sqlite, %q) = %q, want it unchanged", tt.name, tt.in, got)
		}
	}
}

func TestMicros(t *testing.T) {
	t.Parallel()
	if v := toMicros(time.Time{}); v != nil {
		t.Errorf("toMicros(zero) = %v, want nil (NULL)", v)
	}
	if got := fromMicros(nil); !got.IsZero() {
		t.Errorf("fromMicros(nil) = %v, want the zero time", got)
	}
	in := time.Date(2026, 2, 3, 4, 5, 6, 789_123_456, time.FixedZone("x", -7200))
	v := toMicros(in).(int64)
	if got, want := fromMicros(&v), in.Truncate(time.Microsecond).UTC(); got != want {
		t.Errorf("round trip of %v = %v, want %v", in, got, want)
	}
}

// TestMigrationsMatch pins that both dialects have the same migrations, so
// a table added for one engine is not forgotten for the other.
func TestMigrationsMatch(t *testing.T) {
	t.Parallel()
	sq, err := migrationsFor(DialectSQLite)
	if err != nil {
		t.Fatal(err)
	}
	pg, err := migrationsFor(DialectPostgres)
	if err != nil {
		t.Fatal(err)
	}
	if len(sq) != len(pg) {
		t.Fatalf("%d sqlite migrations, %d postgres ones; want the same", len(sq), len(pg))
	}
	for i := range sq {
		if sq[i].name != pg[i].name {
			t.Errorf("migration %d is %q on sqlite, %q on postgres", i, sq[i].name, pg[i].name)
		}
		// Numbers only increase; gaps are allowed, since work done in
		// parallel reserves its numbers in advance.
		if i > 0 && sq[i].name[:4] <= sq[i-1].name[:4] {
			t.Errorf("migration %q does not follow %q: numbers must increase", sq[i].name, sq[i-1].name)
		}
	}
}
