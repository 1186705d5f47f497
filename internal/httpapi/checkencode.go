package httpapi

import (
	"encoding/json"
	"net/http"
	"strconv"
	"sync"
)

// appendCheckResponse appends out as json.Marshal writes it, with a
// newline, without reflection: marshalling was a tenth of a check's CPU
// under wrk (docs/benchmarks.md). TestAppendCheckResponseMatchesMarshal and
// FuzzAppendCheckResponse hold it to json.Marshal byte for byte.
func appendCheckResponse(b []byte, out *checkResponse) []byte {
	b = append(b, '{')
	b = appendDecision(b, &out.decisionJSON)
	if out.DecidedBy != "" {
		b = append(b, `,"decided_by":`...)
		b = appendJSONString(b, out.DecidedBy)
	}
	if len(out.Results) > 0 {
		b = append(b, `,"results":[`...)
		for i := range out.Results {
			res := &out.Results[i]
			if i > 0 {
				b = append(b, ',')
			}
			b = append(b, `{"policy":`...)
			b = appendJSONString(b, res.Policy)
			b = append(b, `,"key":`...)
			b = appendJSONString(b, res.Key)
			b = append(b, ',')
			b = appendDecision(b, &res.decisionJSON)
			b = append(b, `,"decided_by":`...)
			b = appendJSONString(b, res.DecidedBy)
			b = append(b, '}')
		}
		b = append(b, ']')
	}
	if out.ReservationID != "" {
		b = append(b, `,"reservation_id":`...)
		b = appendJSONString(b, out.ReservationID)
	}
	if out.ReservationExpiresAt != "" {
		b = append(b, `,"reservation_expires_at":`...)
		b = appendJSONString(b, out.ReservationExpiresAt)
	}
	return append(b, "}\n"...)
}

// appendDecision appends d's members, without braces.
func appendDecision(b []byte, d *decisionJSON) []byte {
	b = append(b, `"allowed":`...)
	b = strconv.AppendBool(b, d.Allowed)
	b = append(b, `,"limit":`...)
	b = strconv.AppendInt(b, d.Limit, 10)
	b = append(b, `,"remaining":`...)
	b = strconv.AppendInt(b, d.Remaining, 10)
	b = append(b, `,"retry_after_ms":`...)
	b = strconv.AppendInt(b, d.RetryAfterMS, 10)
	b = append(b, `,"reset_after_ms":`...)
	b = strconv.AppendInt(b, d.ResetAfterMS, 10)
	if d.WouldRefuse {
		b = append(b, `,"would_refuse":true`...)
	}
	return b
}

// appendJSONString appends s quoted. Printable ASCII that json.Marshal
// leaves alone is copied; anything else (escapes, HTML characters,
// non-ASCII) is left to json.Marshal, so the bytes are always its own.
func appendJSONString(b []byte, s string) []byte {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < 0x20 || c >= 0x7f || c == '"' || c == '\\' || c == '<' || c == '>' || c == '&' {
			q, _ := json.Marshal(s) // a string always marshals
			return append(b, q...)
		}
	}
	b = append(b, '"')
	b = append(b, s...)
	return append(b, '"')
}

// jsonContentType is the Content-Type of JSON answers, one shared slice
// assigned into the header map (Set would allocate one per request).
var jsonContentType = []string{"application/json"}

var answers = sync.Pool{New: func() any { b := make([]byte, 0, 512); return &b }}

// writeCheckResponse writes out with status 200.
func writeCheckResponse(w http.ResponseWriter, out *checkResponse) {
	bp := answers.Get().(*[]byte)
	b := appendCheckResponse((*bp)[:0], out)
	w.Header()["Content-Type"] = jsonContentType
	w.WriteHeader(http.StatusOK)
	_, _ = w.Write(b)
	if cap(b) <= maxPooledBody {
		*bp = b
		answers.Put(bp)
	}
}
