package store

import (
	"strconv"
	"strings"
	"time"
)

// rebind rewrites the ? placeholders of a query written for SQLite into
// PostgreSQL's $1, $2, ... Question marks inside single-quoted literals,
// double-quoted identifiers and -- comments are left alone. Queries are
// written by us, not users, so this is a small scanner, not a SQL parser.
func rebind(dialect, q string) string {
	if dialect != DialectPostgres || !strings.Contains(q, "?") {
		return q
	}
	var b strings.Builder
	b.Grow(len(q) + 8)
	n := 0
	var quote byte // the open quote character, or 0
	for i := 0; i < len(q); i++ {
		c := q[i]
		switch {
		case quote != 0:
			if c == quote {
				quote = 0 // a doubled quote closes and reopens: same result
			}
		case c == '\'' || c == '"':
			quote = c
		case c == '-' && i+1 < len(q) && q[i+1] == '-':
			end := strings.IndexByte(q[i:], '\n')
			if end < 0 {
				end = len(q) - i
			}
			b.WriteString(q[i : i+end])
			i += end - 1
			continue
		case c == '?':
			n++
			b.WriteByte('$')
			b.WriteString(strconv.Itoa(n))
			continue
		}
		b.WriteByte(c)
	}
	return b.String()
}

// toMicros converts t to the stored form: Unix microseconds, UTC. The zero
// time is stored as NULL, so optional times ("revoked_at") need no sentinel.
func toMicros(t time.Time) any {
	if t.IsZero() {
		return nil
	}
	return t.UnixMicro()
}

// fromMicros converts a stored time back; NULL becomes the zero time.
func fromMicros(v *int64) time.Time {
	if v == nil {
		return time.Time{}
	}
	return time.UnixMicro(*v).UTC()
}

// marks is n comma-separated placeholders.
func marks(n int) string { return "?" + strings.Repeat(", ?", n-1) }

// anys is ids as query arguments, with room for one more.
func anys(ids []int64) []any {
	out := make([]any, len(ids), len(ids)+1)
	for i, id := range ids {
		out[i] = id
	}
	return out
}
