package workflow

import "github.com/sluicehq/sluice/internal/notify"

// Bounds on the data clients hand the engine, beside validate.go's.
const (
	// MaxDataDepth bounds how deep an event's data, and a user's
	// attributes, nest objects and arrays: every branch and match decodes
	// them again, and nothing real nests deeper.
	MaxDataDepth = 32
	// MaxRunDataBytes bounds a run's data, the starting event's with each
	// awaited event's under its name: it is a send step's notification
	// data, which notify bounds alike. An event that would take a waiting
	// run past it fails that run (its outcome says so) instead of resuming
	// it.
	MaxRunDataBytes = notify.MaxDataBytes
	// MaxVersions bounds the versions of one workflow stored: a put past
	// it is refused (TooMany) until Purge deletes the old versions no live
	// run is on, Retention after the next version replaced them.
	MaxVersions = 1000
)

// DataDepth returns how deep the JSON text raw nests objects and arrays
// (0 for a scalar, 1 for {} or {"a":1}): one pass over the bytes,
// strings skipped, without decoding.
func DataDepth(raw []byte) int {
	depth, deepest, inString, escaped := 0, 0, false, false
	for _, c := range raw {
		switch {
		case escaped:
			escaped = false
		case inString:
			switch c {
			case '\\':
				escaped = true
			case '"':
				inString = false
			}
		case c == '"':
			inString = true
		case c == '{' || c == '[':
			depth++
			deepest = max(deepest, depth)
		case c == '}' || c == ']':
			depth--
		}
	}
	return deepest
}
