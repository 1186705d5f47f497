package notify

import (
	"bytes"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/sluicehq/sluice/internal/apperr"
)

// Limits on a request.
const (
	MaxDataBytes      = 64 << 10
	MaxRequestIDBytes = 255
	MaxUserIDBytes    = 255
)

// Request asks for one notification.
type Request struct {
	// RequestID makes the request idempotent: the same RequestID again is
	// answered with the first notification and changes nothing. Empty:
	// every request is new.
	RequestID string
	UserID    string
	Type      string
	// Data fills the template's placeholders: a JSON object, at most
	// MaxDataBytes.
	Data      json.RawMessage
	ExpiresAt time.Time // zero: never
	// Channels narrows the channels tried; empty means all.
	Channels []Channel
}

// Accepted answers a Send.
type Accepted struct {
	NotificationID string
	// Duplicate reports a repeated request_id: nothing new was saved.
	Duplicate bool
}

// Validate checks what can be checked without the store and returns the
// request with Data compacted (an absent Data becomes {}).
func (r Request) Validate(now time.Time) (Request, error) {
	var errs []apperr.FieldError
	bad := func(field, detail string) { errs = append(errs, apperr.FieldError{Field: field, Detail: detail}) }
	switch {
	case r.UserID == "":
		bad("user_id", "is required")
	case len(r.UserID) > MaxUserIDBytes || !printable(r.UserID):
		bad("user_id", fmt.Sprintf("must be at most %d printable bytes", MaxUserIDBytes))
	case IsSystemUser(r.UserID):
		bad("user_id", "must not start with "+SystemUserPrefix+" (reserved for Sluice's own messages)")
	}
	if r.Type == "" {
		bad("type", "is required")
	}
	if len(r.RequestID) > MaxRequestIDBytes || !printable(r.RequestID) {
		bad("request_id", fmt.Sprintf("must be at most %d printable bytes", MaxRequestIDBytes))
	}
	if len(r.Data) > MaxDataBytes {
		bad("data", fmt.Sprintf("must be at most %d bytes", MaxDataBytes))
	} else if len(bytes.TrimSpace(r.Data)) == 0 || string(bytes.TrimSpace(r.Data)) == "null" {
		r.Data = json.RawMessage("{}")
	} else if t := bytes.TrimSpace(r.Data); t[0] != '{' || !json.Valid(t) {
		bad("data", "must be a JSON object")
	} else {
		var buf bytes.Buffer
		_ = json.Compact(&buf, t)
		r.Data = buf.Bytes()
	}
	if !r.ExpiresAt.IsZero() && !r.ExpiresAt.After(now) {
		bad("expires_at", "must be in the future")
	}
	seen := map[Channel]bool{}
	for i, ch := range r.Channels {
		if !ch.Valid() {
			bad(fmt.Sprintf("channels[%d]", i), "unknown channel (want email, sms, push, webhook or inapp)")
		} else if seen[ch] {
			bad(fmt.Sprintf("channels[%d]", i), "listed twice")
		}
		seen[ch] = true
	}
	if err := apperr.Fields(apperr.Unprocessable, "the notification request is invalid", errs); err != nil {
		return r, err
	}
	return r, nil
}

func printable(s string) bool {
	if !utf8.ValidString(s) {
		return false
	}
	for _, r := range s {
		if r < 0x20 || r == 0x7f {
			return false
		}
	}
	return true
}

// hash digests what makes two requests the same: user, type, data (keys
// in canonical order), expiry and channels.
func (r Request) hash() string {
	var data any
	dec := json.NewDecoder(bytes.NewReader(r.Data))
	dec.UseNumber()
	_ = dec.Decode(&data)
	canon, _ := json.Marshal(data) // maps marshal with sorted keys
	chs := make([]string, len(r.Channels))
	for i, ch := range r.Channels {
		chs[i] = string(ch)
	}
	slices.Sort(chs)
	var exp int64
	if !r.ExpiresAt.IsZero() {
		exp = r.ExpiresAt.UnixMicro()
	}
	h := sha256.New()
	for _, part := range []string{r.UserID, r.Type, string(canon), strconv.FormatInt(exp, 10), strings.Join(chs, ",")} {
		fmt.Fprintf(h, "%d:%s;", len(part), part)
	}
	return hex.EncodeToString(h.Sum(nil))[:32]
}

// NewID returns prefix + 12 hex digits of milliseconds + 20 random hex
// digits: unique, and sortable by creation time. Every record id of the
// notification and event pipelines is one ("ntf_", "dl_", "evt_", ...).
func NewID(prefix string, now time.Time) string {
	var b [16]byte
	ms := uint64(now.UnixMilli())
	for i := 5; i >= 0; i-- {
		b[i] = byte(ms)
		ms >>= 8
	}
	_, _ = rand.Read(b[6:])
	return prefix + hex.EncodeToString(b[:])
}

// EncodeCursor writes c as an opaque page token.
func EncodeCursor(c Cursor) string {
	if c.IsZero() {
		return ""
	}
	return base64.RawURLEncoding.EncodeToString([]byte(strconv.FormatInt(c.At.UnixMicro(), 10) + "." + c.ID))
}

// DecodeCursor reads a token made by EncodeCursor; "" is the zero Cursor.
func DecodeCursor(s string) (Cursor, error) {
	if s == "" {
		return Cursor{}, nil
	}
	bad := &apperr.Error{Code: apperr.Invalid, Message: "invalid cursor",
		Fields: []apperr.FieldError{{Field: "cursor", Detail: "is not a cursor this API returned"}}}
	raw, err := base64.RawURLEncoding.DecodeString(s)
	if err != nil {
		return Cursor{}, bad
	}
	at, id, ok := strings.Cut(string(raw), ".")
	us, err := strconv.ParseInt(at, 10, 64)
	if !ok || err != nil || id == "" {
		return Cursor{}, bad
	}
	return Cursor{At: time.UnixMicro(us).UTC(), ID: id}, nil
}
