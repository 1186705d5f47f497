package shorten

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/binary"
	"errors"
	"io"
	"net/url"
	"slices"
	"strings"
)

// ClickIDParam is the query parameter a click id is appended to the target
// under.
const ClickIDParam = "sluice_cid"

// A click id is base64url(link id (8 bytes) | random (8) | MAC (12)): the
// random part makes it unguessable, the MAC (HMAC-SHA-256 under a key
// derived from the code key, so every node shares it) makes it verifiable
// without a lookup, and the link id says which link a conversion belongs
// to even before the click itself is flushed to the store.
const (
	clickIDRaw = 8 + 8 + 12
	// ClickIDLen is the length of a click id's text.
	ClickIDLen = (clickIDRaw*8 + 5) / 6
)

// errBadClickID is what verifying a malformed or forged click id gives.
var errBadClickID = errors.New("not a click id of this server")

func clickKey(visitor []byte) []byte {
	m := hmac.New(sha256.New, visitor)
	m.Write([]byte("sluice click id"))
	return m.Sum(nil)
}

func (s *Service) clickMAC(b []byte) []byte {
	m := hmac.New(sha256.New, s.clickKey)
	m.Write(b)
	return m.Sum(nil)[:12]
}

// NewClickID returns a fresh click id for a click on link linkID.
func (s *Service) NewClickID(linkID int64) (string, error) {
	var b [clickIDRaw]byte
	binary.BigEndian.PutUint64(b[:8], uint64(linkID))
	r := s.opts.Rand
	if r == nil {
		r = rand.Reader
	}
	if _, err := io.ReadFull(r, b[8:16]); err != nil {
		return "", err
	}
	copy(b[16:], s.clickMAC(b[:16]))
	return base64.RawURLEncoding.EncodeToString(b[:]), nil
}

// verifyClickID returns the link id of a click id this server made.
func (s *Service) verifyClickID(id string) (int64, error) {
	if len(id) != ClickIDLen {
		return 0, errBadClickID
	}
	// Strict: one text per id, or the spare bits of the last character
	// would give up to 16 spellings of it, each a new (click id, event).
	b, err := base64.RawURLEncoding.Strict().DecodeString(id)
	if err != nil || len(b) != clickIDRaw || !hmac.Equal(b[16:], s.clickMAC(b[:16])) {
		return 0, errBadClickID
	}
	return int64(binary.BigEndian.Uint64(b[:8])), nil
}

// WithClickID returns target with sluice_cid=id appended to its query,
// before any fragment, and every other byte of target as it was: signed
// URLs and odd encodings survive, since the query is never decoded and
// re-encoded. A sluice_cid already in the query (copied from an earlier
// redirect, say) is cut out, so the target carries exactly one click id,
// the one this redirect made.
func WithClickID(target, id string) string {
	rest, frag, hasFrag := strings.Cut(target, "#")
	if hasFrag {
		frag = "#" + frag
	}
	path, query, _ := strings.Cut(rest, "?")
	if query != "" {
		segs := strings.Split(query, "&")
		kept := slices.DeleteFunc(slices.Clone(segs), isClickIDParam)
		if len(kept) != len(segs) {
			query = strings.Join(kept, "&")
		}
	}
	var b strings.Builder
	b.Grow(len(target) + len(ClickIDParam) + len(id) + 3)
	b.WriteString(path)
	b.WriteByte('?')
	b.WriteString(query)
	if query != "" && !strings.HasSuffix(query, "&") {
		b.WriteByte('&')
	}
	b.WriteString(ClickIDParam + "=" + url.QueryEscape(id))
	b.WriteString(frag)
	return b.String()
}

// isClickIDParam reports whether one key=value segment of a query is a
// sluice_cid parameter, however its key is escaped.
func isClickIDParam(seg string) bool {
	key, _, _ := strings.Cut(seg, "=")
	if k, err := url.QueryUnescape(key); err == nil {
		key = k
	}
	return key == ClickIDParam
}
