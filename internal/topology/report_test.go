package topology

import (
	"bytes"
	"encoding/json"
	"os"
	"reflect"
	"strings"
	"testing"
	"time"
)

func TestWriteTable(t *testing.T) {
	t.Parallel()
	s := Summary{
		Seed: 7,
		Rows: []Row{
			{Fault: "kill -9 node 2", Requests: 400, Errors: 3, LongestStreak: 2, StreakTime: 41 * time.Millisecond,
				RequestsByKind: map[Kind]int{Check: 300, Notify: 60, Redirect: 30, Create: 10},
				ErrorsByKind:   map[Kind]int{Create: 1, Notify: 2},
				Overshoot:      1.5, Lost: 1, Duplicated: 4, OrderViolations: 0, OTPp99: 235 * time.Millisecond,
				BadRedirects: 2, MissingClicks: 5},
			{Fault: NoFault, Requests: 1000},
		},
		Violations: []string{`notification during "kill -9 node 2": n1 accepted but no status read back`},
	}
	var b bytes.Buffer
	if err := s.WriteTable(&b); err != nil {
		t.Fatalf("WriteTable: %v", err)
	}
	got := b.String()
	for _, want := range []string{
		"| fault | requests | errors | errors by kind | longest error streak | overshoot | lost | duplicated | order violations | OTP p99 | bad redirects | missing clicks |\n",
		// Kinds in the order checks, notifications, redirects, creations; only those with errors.
		"| kill -9 node 2 | 400 | 3 (0.75%) | notify 2/60 (3.33%), create 1/10 (10.00%) | 2 (41 ms) | 1.50 | 1 | 4 | 0 | 235 ms | 2 | 5 |\n",
		"| none | 1000 | 0 (0.00%) | - | 0 (0 ms) | 0.00 | 0 | 0 | 0 | 0 ms | 0 | 0 |\n",
		"1 violations:\n- notification during",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("WriteTable wrote\n%s\nwant it to contain\n%s", got, want)
		}
	}

	b.Reset()
	if err := (Summary{Rows: []Row{{Fault: "a | b"}}}).WriteTable(&b); err != nil {
		t.Fatalf("WriteTable: %v", err)
	}
	if got := b.String(); !strings.Contains(got, `| a \| b | 0 | 0 (0.00%)`) || !strings.Contains(got, "no violations") {
		t.Errorf("WriteTable wrote\n%s\nwant the pipe escaped and no violations", got)
	}
}

func TestSummaryJSON(t *testing.T) {
	t.Parallel()
	h := &History{Seed: 42, Nodes: 3}
	h.AddFault(mkFault("kill -9 node 2", 1000, 2000))
	for _, o := range join(checks(3, 1000, true, "k"), []Op{op(Check, 1500, 503), op(Check, 1600, 0, failed)}) {
		h.Add(o)
	}
	s := Summarize(h, Bounds{})
	b, err := json.Marshal(s)
	if err != nil {
		t.Fatalf("Marshal: %v", err)
	}
	for _, want := range []string{`"seed":42`, `"fault":"kill -9 node 2"`, `"longest_error_streak":2`, `"longest_error_streak_ns":101000000`,
		`"requests_by_kind":{"check":5}`, `"errors_by_kind":{"check":2}`, `"violations":[]`} {
		if !strings.Contains(string(b), want) {
			t.Errorf("json.Marshal(Summarize) = %s, want it to contain %s", b, want)
		}
	}
	var back Summary
	if err := json.Unmarshal(b, &back); err != nil {
		t.Fatalf("Unmarshal: %v", err)
	}
	if !reflect.DeepEqual(back, s) {
		t.Errorf("JSON round trip = %+v, want %+v", back, s)
	}
}

// A history written to a file and read back gives the same summary: a
// failing run's checkers can be rerun later.
func TestSummarizeReadHistory(t *testing.T) {
	t.Parallel()
	h := &History{Seed: 3, Nodes: 3}
	h.AddFault(mkFault("kill -9 node 2", 1000, 2000))
	for _, o := range join(checks(25, 1000, true, "k"), sent(0, "n1", 1), []Op{deliver(70, "n1")},
		[]Op{create(0, "abc"), redirect(1500, "abc", 503)}) {
		h.Add(o)
	}
	path := t.TempDir() + "/history.json"
	if err := h.WriteFile(path); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	back, err := ReadHistory(bytes.NewReader(b))
	if err != nil {
		t.Fatal(err)
	}
	want, got := Summarize(h, Bounds{}), Summarize(back, Bounds{})
	if !reflect.DeepEqual(got, want) {
		t.Errorf("Summarize(ReadHistory) = %+v, want %+v", got, want)
	}
	if len(want.Violations) != 3 {
		t.Errorf("Summarize violations = %q, want 3 (overshoot, duplicate, redirect)", want.Violations)
	}
}
