package phone

import (
	"errors"
	"strings"
	"testing"
)

func TestParse(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name, in  string
		e164      string
		country   string
		valid     bool
		typ       Type
		notNumber bool
	}{
		{name: "US", in: "+14155550100", e164: "+14155550100", country: "US", valid: true, typ: FixedLineOrMobile},
		{name: "US formatted", in: "+1 (415) 555-0100", e164: "+14155550100", country: "US", valid: true, typ: FixedLineOrMobile},
		{name: "US premium 900", in: "+19002001234", e164: "+19002001234", country: "US", valid: true, typ: PremiumRate},
		{name: "US toll free", in: "+18005551212", e164: "+18005551212", country: "US", valid: true, typ: TollFree},
		{name: "GB mobile", in: "+447400123456", e164: "+447400123456", country: "GB", valid: true, typ: Mobile},
		{name: "GB premium 09", in: "+449098790000", e164: "+449098790000", country: "GB", valid: true, typ: PremiumRate},
		{name: "DE mobile", in: "+49 151 12345678", e164: "+4915112345678", country: "DE", valid: true, typ: Mobile},
		{name: "DE fixed", in: "+4930123456", e164: "+4930123456", country: "DE", valid: true, typ: FixedLine},
		{name: "FR mobile", in: "+33612345678", e164: "+33612345678", country: "FR", valid: true, typ: Mobile},
		{name: "FR premium 089", in: "+33899123456", e164: "+33899123456", country: "FR", valid: true, typ: PremiumRate},
		{name: "IN mobile", in: "+919876543210", e164: "+919876543210", country: "IN", valid: true, typ: Mobile},
		{name: "BR mobile", in: "+5511987654321", e164: "+5511987654321", country: "BR", valid: true, typ: Mobile},
		{name: "NG mobile", in: "+2348031234567", e164: "+2348031234567", country: "NG", valid: true, typ: Mobile},
		{name: "fits no plan", in: "+15550000000", e164: "+15550000000", typ: Unknown},
		{name: "too short", in: "+1415", e164: "+1415", typ: Unknown},
		{name: "no plus", in: "4155550100", notNumber: true},
		{name: "letters", in: "+call-me", notNumber: true},
		{name: "no such country code", in: "+999123456", notNumber: true},
		{name: "too long", in: "+1" + strings.Repeat("2", MaxLen), notNumber: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			n, err := Parse(tt.in)
			if tt.notNumber {
				if !errors.Is(err, ErrNotNumber) {
					t.Errorf("Parse(%q) = %+v, %v; want ErrNotNumber", tt.in, n, err)
				}
				return
			}
			want := Number{E164: tt.e164, Country: tt.country, Valid: tt.valid, Type: tt.typ}
			if err != nil || n != want {
				t.Errorf("Parse(%q) = %+v, %v; want %+v", tt.in, n, err, want)
			}
		})
	}
}

func TestKnownCountry(t *testing.T) {
	t.Parallel()
	for code, want := range map[string]bool{"US": true, "GB": true, "NG": true, "XX": false, "": false, "us": false} {
		if got := KnownCountry(code); got != want {
			t.Errorf("KnownCountry(%q) = %v, want %v", code, got, want)
		}
	}
}

// FuzzParse: any input either fails with ErrNotNumber or parses to an
// E.164 number of "+" and at most 15 digits... or the digits given.
func FuzzParse(f *testing.F) {
	for _, s := range []string{"+14155550100", "+44 909 879 0000", "+", "++1", "+1 (", "+٤٤"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		n, err := Parse(s)
		if err != nil {
			if !errors.Is(err, ErrNotNumber) {
				t.Fatalf("Parse(%q) error %v, want ErrNotNumber", s, err)
			}
			return
		}
		if !strings.HasPrefix(n.E164, "+") || strings.Trim(n.Digits(), "0123456789") != "" || n.Digits() == "" {
			t.Fatalf("Parse(%q).E164 = %q, want + and digits", s, n.E164)
		}
		if n.Valid != (n.Country != "") {
			t.Fatalf("Parse(%q) = %+v: a valid number has a country, an invalid one none", s, n)
		}
	})
}

func BenchmarkParse(b *testing.B) {
	for b.Loop() {
		if _, err := Parse("+447400123456"); err != nil {
			b.Fatal(err)
		}
	}
}
