package rediscache

import (
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/rueidis"

	"github.com/sluicehq/sluice/internal/enginetest"
	"github.com/sluicehq/sluice/internal/shorten"
)

// client connects to the test Redis for the test.
func client(t *testing.T) rueidis.Client {
	t.Helper()
	rc := enginetest.RedisClient(t, enginetest.RedisURL(t), enginetest.NoClientCache)
	return rc
}

func TestCache(t *testing.T) {
	t.Parallel()
	rc := client(t)
	ctx := t.Context()
	c := New(rc, fmt.Sprintf("sluice-test:%d:", time.Now().UnixNano()))
	if _, ok, err := c.Get(ctx, "absent"); ok || err != nil {
		t.Errorf("Get(absent) = %v, %v; want a miss", ok, err)
	}
	exp := time.Date(2030, 1, 2, 3, 4, 5, 6000, time.UTC)
	tests := []shorten.CachedLink{
		{ID: 42, URL: "https://example.com/a b?c=d e", ExpiresAt: exp},
		{ID: 7, URL: "https://example.com/"},
		{ID: 9, URL: "https://example.com/9", FreshUntil: exp.Add(-time.Hour)},
		{ID: 10, URL: "https://example.com/10", FreshUntil: exp, Rules: `[{"if":{"os":["ios"]},"url":"https://example.com/ios"}]`},
	}
	for i, want := range tests {
		code := fmt.Sprint("code", i)
		if err := c.Set(ctx, code, want, time.Minute); err != nil {
			t.Fatalf("Set: %v", err)
		}
		got, ok, err := c.Get(ctx, code)
		if err != nil || !ok || got != want {
			t.Errorf("Get(%s) = %+v, %v, %v; want %+v", code, got, ok, err, want)
		}
		ttl, err := rc.Do(ctx, rc.B().Pttl().Key(c.prefix+code).Build()).AsInt64()
		if err != nil || ttl <= 0 || ttl > 60_000 {
			t.Errorf("PTTL = %d, %v; want an expiry within the minute", ttl, err)
		}
		if err := c.Delete(ctx, code); err != nil {
			t.Fatalf("Delete: %v", err)
		}
		if _, ok, _ := c.Get(ctx, code); ok {
			t.Errorf("Get after Delete hit")
		}
	}
	if err := c.Set(ctx, "short", tests[0], time.Microsecond); err != nil {
		t.Errorf("Set with a sub-millisecond ttl = %v", err)
	}
	if _, ok, _ := c.Get(ctx, "short"); ok {
		t.Error("a sub-millisecond ttl stored an entry")
	}
	if err := rc.Do(ctx, rc.B().Set().Key(c.prefix+"junk").Value("junk").Build()).Error(); err != nil {
		t.Fatal(err)
	}
	if _, _, err := c.Get(ctx, "junk"); err == nil {
		t.Error("Get of a malformed value succeeded, want an error")
	}
}

// An entry written by an older node ("id expiry url") still reads, fresh;
// one written now carries a version an older node's parse refuses.
func TestCacheEncodings(t *testing.T) {
	t.Parallel()
	got, err := decode("42 0 https://example.com/x")
	if want := (shorten.CachedLink{ID: 42, URL: "https://example.com/x"}); err != nil || got != want {
		t.Errorf("decode(old form) = %+v, %v; want %+v", got, err, want)
	}
	enc := encode(shorten.CachedLink{ID: 42, URL: "https://example.com/x", FreshUntil: time.UnixMicro(5)})
	if enc != "2:42 0 5 https://example.com/x" {
		t.Errorf("encode = %q", enc)
	}
	ruled := shorten.CachedLink{ID: 42, URL: "https://example.com/x", FreshUntil: time.UnixMicro(5).UTC(), Rules: `[{"url":"https://e.com/"}]`}
	if enc := encode(ruled); enc != "3:42 0 5 https://example.com/x\n"+ruled.Rules {
		t.Errorf("encode(with rules) = %q", enc)
	} else if got, err := decode(enc); err != nil || got != ruled {
		t.Errorf("decode(encode(with rules)) = %+v, %v; want %+v", got, err, ruled)
	}
	// What a node that knows only "2:" makes of a link with rules: no
	// link, so it reads the database.
	if _, err := decodeV2("3:42 0 5 https://example.com/x\n[]"); err == nil {
		t.Error("a 2: reader accepted a 3: entry")
	}
	for _, bad := range []string{"2:42 0 https://example.com/x", "2:42 0 5 ", "x 0 https://e", "2:", "3:42 0 5 https://e.com/", "3:42 0 5 https://e.com/\n"} {
		if l, err := decode(bad); err == nil {
			t.Errorf("decode(%q) = %+v, want an error", bad, l)
		}
	}
}

// decodeV2 is decode as the previous release had it, which knew "2:" and
// the unversioned form only.
func decodeV2(s string) (shorten.CachedLink, error) {
	rest, current := strings.CutPrefix(s, version)
	fields := 2
	if current {
		fields = 3
	}
	for range fields {
		f, r, ok := strings.Cut(rest, " ")
		if _, err := strconv.ParseInt(f, 10, 64); !ok || err != nil {
			return shorten.CachedLink{}, fmt.Errorf("malformed cached link %q", s)
		}
		rest = r
	}
	return shorten.CachedLink{URL: rest}, nil
}
