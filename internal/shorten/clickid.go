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

// WithClickID returns target with sluice_cid=id added to its query (any
// value already there is replaced, so a visitor cannot plant one).
func WithClickID(target, id string) string {
	u, err := url.Parse(target)
	if err != nil {
		return target // validated at creation; not reached
	}
	q := u.Query()
	q.Set(ClickIDParam, id)
	u.RawQuery = q.Encode()
	if strings.HasSuffix(target, "#") && u.Fragment == "" {
		return u.String() + "#"
	}
	return u.String()
}
