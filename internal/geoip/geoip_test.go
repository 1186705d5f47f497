package geoip

import (
	"bytes"
	"context"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/maxmind/mmdbwriter"
	"github.com/maxmind/mmdbwriter/mmdbtype"
)

// network is one range of a test database and what it says.
type network struct {
	cidr, country, city string
}

// writeDB writes a small City-format database of nets to path, the way
// the real ones are laid out (country.iso_code, city.names.en).
func writeDB(t testing.TB, path string, nets ...network) {
	t.Helper()
	tree, err := mmdbwriter.New(mmdbwriter.Options{DatabaseType: "GeoLite2-City", RecordSize: 24, IncludeReservedNetworks: true})
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range nets {
		_, ipnet, err := net.ParseCIDR(n.cidr)
		if err != nil {
			t.Fatal(err)
		}
		rec := mmdbtype.Map{"country": mmdbtype.Map{"iso_code": mmdbtype.String(n.country)}}
		if n.city != "" {
			rec["city"] = mmdbtype.Map{"names": mmdbtype.Map{"en": mmdbtype.String(n.city), "fr": mmdbtype.String("x")}}
		}
		if err := tree.Insert(ipnet, rec); err != nil {
			t.Fatal(err)
		}
	}
	var buf bytes.Buffer
	if _, err := tree.WriteTo(&buf); err != nil {
		t.Fatal(err)
	}
	// Written aside and renamed, as an operator's update should be.
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, buf.Bytes(), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, path); err != nil {
		t.Fatal(err)
	}
}

func TestLocate(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "city.mmdb")
	writeDB(t, path, network{"203.0.113.0/24", "FR", "Paris"}, network{"198.51.100.0/24", "BE", ""},
		network{"2001:db8::/32", "DE", "Berlin"})
	db, err := Open(path, nil)
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	tests := []struct{ addr, country, city string }{
		{"203.0.113.9", "FR", "Paris"},
		{"::ffff:203.0.113.9", "FR", "Paris"},
		{"198.51.100.1", "BE", ""},
		{"2001:db8::1", "DE", "Berlin"},
		{"192.0.2.1", "", ""},
	}
	for _, tt := range tests {
		if c, city := db.Locate(netip.MustParseAddr(tt.addr)); c != tt.country || city != tt.city {
			t.Errorf("Locate(%s) = %q, %q; want %q, %q", tt.addr, c, city, tt.country, tt.city)
		}
	}
}

func TestOpenRefuses(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	junk := filepath.Join(dir, "junk.mmdb")
	if err := os.WriteFile(junk, []byte("not a database"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, path := range []string{filepath.Join(dir, "absent.mmdb"), junk} {
		if _, err := Open(path, nil); err == nil {
			t.Errorf("Open(%s) succeeded", path)
		}
	}
}

// TestWatchReloads replaces the file under a watching DB: the next tick
// loads the new one; a broken file keeps the last good one loaded, and a
// good file after it loads again.
func TestWatchReloads(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "country.mmdb")
	writeDB(t, path, network{"203.0.113.0/24", "FR", ""})
	db, err := Open(path, nil)
	if err != nil {
		t.Fatal(err)
	}
	ticks := make(chan time.Time)
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan struct{})
	go func() { db.Watch(ctx, ticks); close(done) }()
	t.Cleanup(func() { cancel(); <-done })
	addr := netip.MustParseAddr("203.0.113.9")
	tick := func() { ticks <- time.Now() } // returns once Watch has taken it
	locateAfterTick := func() string {
		tick()
		tick() // the first tick's reload is done once Watch takes the second
		c, _ := db.Locate(addr)
		return c
	}

	if got := locateAfterTick(); got != "FR" {
		t.Fatalf("unchanged file: Locate = %q, want FR", got)
	}
	writeDB(t, path, network{"203.0.113.0/24", "DE", ""}, network{"192.0.2.0/24", "US", ""})
	bump(t, path, 1)
	if got := locateAfterTick(); got != "DE" {
		t.Errorf("after the file changed: Locate = %q, want DE", got)
	}
	if err := os.WriteFile(path, []byte("half a copy"), 0o600); err != nil {
		t.Fatal(err)
	}
	bump(t, path, 2)
	if got := locateAfterTick(); got != "DE" {
		t.Errorf("after a broken file: Locate = %q, want DE (the last good database)", got)
	}
	writeDB(t, path, network{"203.0.113.0/24", "IT", ""})
	bump(t, path, 3)
	if got := locateAfterTick(); got != "IT" {
		t.Errorf("after a good file again: Locate = %q, want IT", got)
	}
}

// bump sets path's modification time n seconds into the future, so a
// rewrite within the file system's timestamp granularity still shows.
func bump(t *testing.T, path string, n int) {
	t.Helper()
	at := time.Now().Add(time.Duration(n) * time.Hour)
	if err := os.Chtimes(path, at, at); err != nil {
		t.Fatal(err)
	}
}

func BenchmarkLocate(b *testing.B) {
	path := filepath.Join(b.TempDir(), "city.mmdb")
	writeDB(b, path, network{"203.0.113.0/24", "FR", "Paris"})
	db, err := Open(path, nil)
	if err != nil {
		b.Fatal(err)
	}
	addr := netip.MustParseAddr("203.0.113.9")
	b.ReportAllocs()
	for b.Loop() {
		if c, _ := db.Locate(addr); c != "FR" {
			b.Fatal(c)
		}
	}
}
