package shorten

import (
	"strings"
	"testing"
)

// TestPermutationIsBijective walks every value of small domains: each
// image is in range, distinct, and Unpermute undoes Permute.
func TestPermutationIsBijective(t *testing.T) {
	t.Parallel()
	for _, n := range []int{1, 2, 3} {
		for _, key := range []string{"k", "another key", strings.Repeat("x", 100)} {
			c := newCodec([]byte(key), n)
			seen := make([]bool, c.Space())
			for x := range c.Space() {
				y := c.Permute(x)
				if y >= c.Space() {
					t.Fatalf("n=%d key=%q: Permute(%d) = %d, outside [0, %d)", n, key, x, y, c.Space())
				}
				if seen[y] {
					t.Fatalf("n=%d key=%q: Permute(%d) = %d, already an image", n, key, x, y)
				}
				seen[y] = true
				if back := c.Unpermute(y); back != x {
					t.Fatalf("n=%d key=%q: Unpermute(Permute(%d)) = %d", n, key, x, back)
				}
			}
		}
	}
}

func TestCodecRoundTrip(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		n    int
		ids  []uint64
	}{
		{"default length", 7, []uint64{0, 1, 2, 3, 125, 1 << 20, 3521614606207}},
		{"shortest", 4, []uint64{0, 14776335}},
		{"longest", 10, []uint64{0, 1, 839299365868340223}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			c, err := NewCodec([]byte("secret key"), tt.n)
			if err != nil {
				t.Fatal(err)
			}
			for _, id := range tt.ids {
				code, err := c.Encode(id)
				if err != nil {
					t.Fatalf("Encode(%d): %v", id, err)
				}
				if len(code) != tt.n || !validCode(code) {
					t.Errorf("Encode(%d) = %q, want %d base62 characters", id, code, tt.n)
				}
				if got, ok := c.Decode(code); !ok || got != id {
					t.Errorf("Decode(Encode(%d) = %q) = %d, %v", id, code, got, ok)
				}
			}
			if _, err := c.Encode(c.Space()); err == nil {
				t.Errorf("Encode(Space()) succeeded, want an error: no code is left")
			}
		})
	}
}

func TestCodesLookUnrelated(t *testing.T) {
	t.Parallel()
	c, _ := NewCodec([]byte("k1"), 7)
	other, _ := NewCodec([]byte("k2"), 7)
	a, _ := c.Encode(1000)
	b, _ := c.Encode(1001)
	if a[:4] == b[:4] {
		t.Errorf("consecutive ids gave %q and %q, which share a prefix", a, b)
	}
	if x, _ := other.Encode(1000); x == a {
		t.Errorf("two keys gave the same code %q for one id", a)
	}
}

func TestNewCodecErrors(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		name string
		key  string
		n    int
	}{{"too short", "k", 3}, {"too long", "k", 11}, {"no key", "", 7}} {
		if _, err := NewCodec([]byte(tt.key), tt.n); err == nil {
			t.Errorf("%s: NewCodec(%q, %d) succeeded, want an error", tt.name, tt.key, tt.n)
		}
	}
}

func TestDecodeRejects(t *testing.T) {
	t.Parallel()
	c, _ := NewCodec([]byte("k"), 7)
	for _, code := range []string{"", "abc", "abcdefgh", "abc-efg", "ZZZZZZZ0"} {
		if _, ok := c.Decode(code); ok {
			t.Errorf("Decode(%q) = ok, want rejected", code)
		}
	}
}

func FuzzPermutation(f *testing.F) {
	f.Add([]byte("key"), uint64(0), uint8(1))
	f.Add([]byte("another"), uint64(123456789), uint8(7))
	f.Fuzz(func(t *testing.T, key []byte, x uint64, n uint8) {
		if len(key) == 0 {
			return
		}
		c := newCodec(key, 1+int(n)%MaxCodeLength)
		x %= c.Space()
		y := c.Permute(x)
		if y >= c.Space() || c.Unpermute(y) != x {
			t.Fatalf("n=%d: Permute(%d) = %d, Unpermute of it = %d", c.n, x, y, c.Unpermute(y))
		}
		code := c.format(y)
		if v, ok := c.parse(code); !ok || v != y {
			t.Fatalf("parse(format(%d) = %q) = %d, %v", y, code, v, ok)
		}
	})
}

func BenchmarkEncode(b *testing.B) {
	c, _ := NewCodec([]byte("key"), 7)
	var id uint64
	for b.Loop() {
		id++
		_, _ = c.Encode(id)
	}
}
