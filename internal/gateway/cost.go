package gateway

import (
	"bytes"
	"encoding/json"
	"errors"
	"math"
	"strconv"
	"strings"

	"github.com/sluicehq/sluice/ratelimit"
)

// costState is what a response said about its cost.
type costState int

const (
	costMissing costState = iota // nothing where the cost should be
	costFound
	costInvalid // a value there that is no cost: negative, not a number
)

// parseCost reads a cost, a header's value or a JSON number: a whole or
// fractional number (rounded up). A cost too large for the store (2^53
// and more, 1e300, an overflowing exponent) is the largest it takes, so a
// huge reported cost never charges less than a large one.
func parseCost(s string) (int64, costState) {
	s = strings.TrimSpace(s)
	if s == "" {
		return 0, costMissing
	}
	if n, err := strconv.ParseInt(s, 10, 64); err == nil {
		if n < 0 {
			return 0, costInvalid
		}
		return min(n, ratelimit.MaxUsageCost), costFound
	}
	f, err := strconv.ParseFloat(s, 64)
	switch {
	case err != nil && !errors.Is(err, strconv.ErrRange), math.IsNaN(f), f < 0, strings.HasPrefix(s, "-"):
		return 0, costInvalid
	case f >= ratelimit.MaxUsageCost: // +Inf too
		return ratelimit.MaxUsageCost, costFound
	case f == 0 && err != nil: // a positive number too small for a float64
		return 1, costFound
	}
	return int64(math.Ceil(f)), costFound
}

// fieldOf returns the cost at dotted path in a JSON document.
func fieldOf(doc []byte, path string) (int64, costState) {
	var v any
	dec := json.NewDecoder(bytes.NewReader(doc))
	dec.UseNumber()
	if dec.Decode(&v) != nil {
		return 0, costMissing
	}
	for part := range strings.SplitSeq(path, ".") {
		obj, ok := v.(map[string]any)
		if !ok {
			return 0, costMissing
		}
		if v, ok = obj[part]; !ok {
			return 0, costMissing
		}
	}
	n, ok := v.(json.Number)
	if !ok {
		return 0, costInvalid // a string ("NaN", "12"), null, an object...
	}
	return parseCost(n.String())
}
