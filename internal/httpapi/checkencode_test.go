package httpapi

import (
	"bytes"
	"encoding/json"
	"testing"
)

func marshalLine(t testing.TB, v any) []byte {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return append(b, '\n')
}

func TestAppendCheckResponseMatchesMarshal(t *testing.T) {
	dec := decisionJSON{Allowed: true, Limit: 600, Remaining: 599, ResetAfterMS: 100}
	tests := []struct {
		name string
		out  checkResponse
	}{
		{"zero", checkResponse{}},
		{"single", checkResponse{decisionJSON: dec, DecidedBy: "rule"}},
		{"refused", checkResponse{decisionJSON: decisionJSON{Limit: 10, Remaining: -3, RetryAfterMS: 1, ResetAfterMS: 999, WouldRefuse: true}, DecidedBy: "block"}},
		{"batch", checkResponse{decisionJSON: dec, Results: []resultJSON{
			{Policy: "paid", Key: "k1", decisionJSON: dec, DecidedBy: "rule"},
			{Policy: "a<b>&\"c\\", Key: "é\u2028\n\x01\xff", DecidedBy: ""},
		}}},
		{"reservation", checkResponse{decisionJSON: dec, DecidedBy: "rule",
			reservationJSON: reservationJSON{ReservationID: "r_123", ReservationExpiresAt: "2026-12-01T10:00:00Z"}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := appendCheckResponse(nil, &tt.out)
			if want := marshalLine(t, tt.out); !bytes.Equal(got, want) {
				t.Errorf("appendCheckResponse = %s, json.Marshal = %s", got, want)
			}
		})
	}
}

// FuzzAppendCheckResponse holds the appended answer to json.Marshal for
// any strings and numbers.
func FuzzAppendCheckResponse(f *testing.F) {
	f.Add("paid", "api_key:1", "rule", "", int64(600), int64(599), int64(0), true, false)
	f.Add("a<b>", "é\u2028\x00", "block", "r_1", int64(-1), int64(1<<62), int64(7), false, true)
	f.Fuzz(func(t *testing.T, policy, key, by, rid string, limit, remaining, retry int64, allowed, batch bool) {
		d := decisionJSON{Allowed: allowed, Limit: limit, Remaining: remaining, RetryAfterMS: retry, ResetAfterMS: retry / 2, WouldRefuse: !allowed}
		out := checkResponse{decisionJSON: d, DecidedBy: by, reservationJSON: reservationJSON{ReservationID: rid, ReservationExpiresAt: key}}
		if batch {
			out.Results = []resultJSON{{Policy: policy, Key: key, decisionJSON: d, DecidedBy: by}, {Policy: key, Key: policy}}
		}
		if got, want := appendCheckResponse(nil, &out), marshalLine(t, out); !bytes.Equal(got, want) {
			t.Fatalf("appendCheckResponse = %s, json.Marshal = %s", got, want)
		}
	})
}
