package enginetest

import (
	"context"
	"errors"
	"net"
	"slices"
	"testing"
	"time"
)

func TestDNSAnswersTXT(t *testing.T) {
	t.Parallel()
	d := StartDNS(t)
	r := &net.Resolver{PreferGo: true, Dial: func(ctx context.Context, network, _ string) (net.Conn, error) {
		var dl net.Dialer
		return dl.DialContext(ctx, network, d.Addr)
	}}
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	long := string(make([]byte, 300)) // two strings in one record, joined by the resolver
	d.SetTXT("_sluice.Go.Example.com.", "token-a", long)
	got, err := r.LookupTXT(ctx, "_sluice.go.example.com")
	if err != nil || !slices.Equal(got, []string{"token-a", long}) {
		t.Errorf("LookupTXT = %d records, %v; want token-a and the 300-byte value", len(got), err)
	}
	d.SetTXT("_sluice.go.example.com")
	_, err = r.LookupTXT(ctx, "_sluice.go.example.com")
	var dnsErr *net.DNSError
	if !errors.As(err, &dnsErr) || !dnsErr.IsNotFound {
		t.Errorf("LookupTXT after removal = %v, want not found", err)
	}
	if d.Queries() == 0 {
		t.Error("Queries() = 0")
	}
}
