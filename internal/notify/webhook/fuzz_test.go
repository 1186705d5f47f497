package webhook

import (
	"strings"
	"testing"
)

// FuzzSignVerify: a signature verifies for exactly the id, timestamp and
// body it was made for, among other signatures in the header, and Verify
// never panics on an arbitrary header.
func FuzzSignVerify(f *testing.F) {
	f.Add([]byte("whsec-key"), "n1:webhook", int64(1700000000), []byte(`{"type":"order.shipped"}`), "v1,bogus")
	f.Add([]byte{}, "", int64(-1), []byte{}, "")
	f.Add([]byte("k"), "a.1", int64(2), []byte("3."), "v1, v1,AAAA v2,x")
	f.Fuzz(func(t *testing.T, key []byte, id string, ts int64, body []byte, header string) {
		sig := Sign(key, id, ts, body)
		if !strings.HasPrefix(sig, "v1,") || strings.ContainsAny(sig, " \t\n") {
			t.Fatalf("Sign = %q, want one v1 signature", sig)
		}
		_ = Verify(key, id, ts, body, header)
		if !Verify(key, id, ts, body, header+" "+sig) || !Verify(key, id, ts, body, sig+" "+header) {
			t.Fatalf("Verify refused its own signature among others (header %q)", header)
		}
		if Verify(key, id+"x", ts, body, sig) || Verify(key, id, ts+1, body, sig) || Verify(key, id, ts, append(body, 'x'), sig) {
			t.Fatalf("a signature verified for another id, timestamp or body")
		}
		if strings.Contains(header, sig) {
			return // the fuzzer found the signature itself
		}
		if Verify(key, id, ts, body, header) && !strings.Contains(header, sig) {
			t.Fatalf("Verify accepted header %q without the signature %q", header, sig)
		}
	})
}
