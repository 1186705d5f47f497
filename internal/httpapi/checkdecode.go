package httpapi

import "strconv"

// decodeCheckFast decodes the common check body, a flat object such as
//
//	{"policy":"paid","key":"api_key:42","cost":1}
//
// without reflection: encoding/json's strict decoder was a fifth of a
// check's CPU under wrk (docs/benchmarks.md). It reports ok only for bodies
// it understands completely: the keys policy, key, cost, reserve, charge and
// reservation_ttl spelled exactly, strings of printable ASCII without
// escapes, cost a plain integer of up to 18 digits, reserve true or false,
// JSON whitespace anywhere between tokens and nothing after the object.
// Anything else (checks, null, escapes, unknown or differently cased keys,
// malformed JSON) is not ok and goes to decodeBody, whose answers and error
// messages are the contract; FuzzDecodeCheckFast holds the two to the same
// result wherever this one answers.
func decodeCheckFast(body []byte) (checkBody, bool) {
	var out checkBody
	// One string for the whole body: the decoded strings are slices of
	// it, one allocation instead of one per field.
	src := string(body)
	i := skipSpace(src, 0)
	if i >= len(src) || src[i] != '{' {
		return out, false
	}
	i = skipSpace(src, i+1)
	if i < len(src) && src[i] == '}' {
		return out, skipSpace(src, i+1) == len(src)
	}
	for {
		key, j, ok := plainString(src, i)
		if !ok {
			return out, false
		}
		i = skipSpace(src, j)
		if i >= len(src) || src[i] != ':' {
			return out, false
		}
		i = skipSpace(src, i+1)
		switch key {
		case "policy", "key", "charge", "reservation_ttl":
			s, j, ok := plainString(src, i)
			if !ok {
				return out, false
			}
			switch key {
			case "policy":
				out.Policy = s
			case "key":
				out.Key = s
			case "charge":
				out.Charge = s
			default:
				out.ReservationTTL = s
			}
			i = j
		case "cost":
			n, j, ok := plainInt(src, i)
			if !ok {
				return out, false
			}
			out.Cost = &n
			i = j
		case "reserve":
			var b bool
			switch {
			case len(src)-i >= 4 && src[i:i+4] == "true":
				b, i = true, i+4
			case len(src)-i >= 5 && src[i:i+5] == "false":
				i += 5
			default:
				return out, false
			}
			out.Reserve = &b
		default:
			return out, false
		}
		i = skipSpace(src, i)
		if i >= len(src) {
			return out, false
		}
		switch src[i] {
		case ',':
			i = skipSpace(src, i+1)
		case '}':
			return out, skipSpace(src, i+1) == len(src)
		default:
			return out, false
		}
	}
}

// skipSpace returns the index of the first byte at or after i that is not
// JSON whitespace.
func skipSpace(s string, i int) int {
	for i < len(s) && (s[i] == ' ' || s[i] == '\t' || s[i] == '\n' || s[i] == '\r') {
		i++
	}
	return i
}

// plainString reads a JSON string at s[i] made only of printable ASCII
// without escapes, returning its contents and the index after it.
func plainString(s string, i int) (string, int, bool) {
	if i >= len(s) || s[i] != '"' {
		return "", 0, false
	}
	for j := i + 1; j < len(s); j++ {
		switch c := s[j]; {
		case c == '"':
			return s[i+1 : j], j + 1, true
		case c == '\\' || c < 0x20 || c >= 0x7f:
			return "", 0, false
		}
	}
	return "", 0, false
}

// plainInt reads a JSON integer at s[i]: an optional minus, then 0 or a
// non-zero digit followed by up to 17 more (so it fits an int64), not
// followed by a fraction or exponent. -0 is left to the strict decoder.
func plainInt(s string, i int) (int64, int, bool) {
	j := i
	if j < len(s) && s[j] == '-' {
		j++
	}
	start := j
	for j < len(s) && s[j] >= '0' && s[j] <= '9' {
		j++
	}
	digits := s[start:j]
	if len(digits) == 0 || len(digits) > 18 || (digits[0] == '0' && (len(digits) > 1 || start > i)) {
		return 0, 0, false
	}
	if j < len(s) && (s[j] == '.' || s[j] == 'e' || s[j] == 'E') {
		return 0, 0, false
	}
	n, err := strconv.ParseInt(s[i:j], 10, 64)
	return n, j, err == nil
}
