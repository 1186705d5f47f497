package bench

import (
	"slices"
	"strings"
	"testing"
)

func TestPickScenarios(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name  string
		names []string
		want  []string
	}{
		{"default: all", nil, []string{"check-http", "check-grpc", "redirect", "notify", "campaign"}},
		{"named, in the order named", []string{"notify", "check-http"}, []string{"notify", "check-http"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got, err := PickScenarios(tt.names)
			if err != nil {
				t.Fatal(err)
			}
			var names []string
			for _, s := range got {
				names = append(names, s.Name)
			}
			if !slices.Equal(names, tt.want) {
				t.Errorf("PickScenarios(%q) = %v, want %v", tt.names, names, tt.want)
			}
		})
	}
	if _, err := PickScenarios([]string{"nope"}); err == nil || !strings.Contains(err.Error(), `unknown scenario "nope"`) {
		t.Errorf("PickScenarios(nope) = %v, want unknown scenario", err)
	}
}

// TestChecksAgainstBare drives check-http and check-grpc at the bare
// servers, as Sluice and as the compared implementation: a row for each,
// every request OK.
func TestChecksAgainstBare(t *testing.T) {
	t.Parallel()
	s := &Session{Options: Options{Workers: 2, Requests: 50}, Policy: "p", Keys: 4, PerCall: 2,
		Domain: DefaultDomain, Descriptor: "remote_address"}
	stop, err := s.SetCompare("bare")
	if err != nil {
		t.Fatal(err)
	}
	defer stop()
	s.Server, s.GRPCAddr = strings.TrimRight(s.CompareHTTP, "/"), s.CompareGRPC
	scenarios, err := PickScenarios([]string{"check-http", "check-grpc"})
	if err != nil {
		t.Fatal(err)
	}
	var out strings.Builder
	if err := s.Run(t.Context(), &out, scenarios); err != nil {
		t.Fatalf("Run = %v\n%s", err, out.String())
	}
	var got []string
	for _, row := range strings.Split(strings.TrimSpace(out.String()), "\n")[1:] {
		f := strings.Fields(row)
		if len(f) < 10 || f[3] != "50" || f[4] != "0" {
			t.Errorf("row %q: want 50 OK and 0 errors", row)
			continue
		}
		got = append(got, f[0]+"/"+f[1])
	}
	want := []string{"check-http/sluice", "check-http/compare", "check-grpc/sluice", "check-grpc/compare"}
	if !slices.Equal(got, want) {
		t.Errorf("rows %v, want %v\n%s", got, want, out.String())
	}
}

// TestRoundsAlternate checks that --rounds runs each side that many times
// and adds the runs up into one row per target, the Sluice row naming its
// share of the compared rate.
func TestRoundsAlternate(t *testing.T) {
	t.Parallel()
	s := &Session{Options: Options{Workers: 2, Requests: 30}, Policy: "p", Keys: 4, Rounds: 3}
	stop, err := s.SetCompare("bare")
	if err != nil {
		t.Fatal(err)
	}
	defer stop()
	s.Server = strings.TrimRight(s.CompareHTTP, "/")
	scenarios, err := PickScenarios([]string{"check-http"})
	if err != nil {
		t.Fatal(err)
	}
	var out strings.Builder
	if err := s.Run(t.Context(), &out, scenarios); err != nil {
		t.Fatalf("Run = %v\n%s", err, out.String())
	}
	rows := strings.Split(strings.TrimSpace(out.String()), "\n")[1:]
	if len(rows) != 2 {
		t.Fatalf("%d rows, want 2:\n%s", len(rows), out.String())
	}
	for _, row := range rows {
		if f := strings.Fields(row); len(f) < 10 || f[3] != "90" || f[4] != "0" {
			t.Errorf("row %q: want 90 OK (3 rounds of 30) and 0 errors", row)
		}
	}
	if !strings.Contains(rows[0], "% of compare") {
		t.Errorf("sluice row %q does not give its share of compare", rows[0])
	}
}
