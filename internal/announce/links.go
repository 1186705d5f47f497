package announce

import (
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/sluicehq/sluice/internal/shorten"
)

// The short link announcement subjects, before the deployment's prefix:
// a link is named by shorten.Key (its code, or "domain/code" on a custom
// domain, which a node that knows no domains takes for an invalid code
// and ignores); a deleted link carries its key; a created one its code, id, expiry
// (Unix microseconds, 0 for none) and URL, space-separated. A link with
// redirect rules is announced when created or when its rules change, as
// "code r:id expiry url\nrules": a node that does not know rules fails to
// read the id and ignores the announcement (it reads the link from the
// shared cache or the store) rather than cache a wrong URL.
const (
	SubjectLinksDeleted = "links.deleted"
	SubjectLinksCreated = "links.created"
	// SubjectDomainsChanged carries nothing: a custom domain was added or
	// removed, read them again.
	SubjectDomainsChanged = "links.domains.changed"
)

// EncodeLinkCreated is a created link on the wire (SubjectLinksCreated).
func EncodeLinkCreated(code string, l shorten.CachedLink) string {
	var exp int64
	if !l.ExpiresAt.IsZero() {
		exp = l.ExpiresAt.UnixMicro()
	}
	if l.Rules != "" {
		return code + " " + rulesMark + strconv.FormatInt(l.ID, 10) + " " + strconv.FormatInt(exp, 10) + " " + l.URL + "\n" + l.Rules
	}
	return code + " " + strconv.FormatInt(l.ID, 10) + " " + strconv.FormatInt(exp, 10) + " " + l.URL
}

// rulesMark prefixes the id of a link announced with its rules.
const rulesMark = "r:"

// DecodeLinkCreated reads what EncodeLinkCreated wrote.
func DecodeLinkCreated(s string) (code string, l shorten.CachedLink, err error) {
	f := strings.SplitN(s, " ", 4)
	if len(f) != 4 || f[0] == "" || f[3] == "" {
		return "", shorten.CachedLink{}, fmt.Errorf("malformed link announcement %q", s)
	}
	rawID, ruled := strings.CutPrefix(f[1], rulesMark)
	id, err1 := strconv.ParseInt(rawID, 10, 64)
	exp, err2 := strconv.ParseInt(f[2], 10, 64)
	if err1 != nil || err2 != nil {
		return "", shorten.CachedLink{}, fmt.Errorf("malformed link announcement %q", s)
	}
	l = shorten.CachedLink{ID: id, URL: f[3]}
	if ruled {
		var ok bool
		if l.URL, l.Rules, ok = strings.Cut(f[3], "\n"); !ok || l.URL == "" || l.Rules == "" {
			return "", shorten.CachedLink{}, fmt.Errorf("malformed link announcement %q", s)
		}
	}
	if exp != 0 {
		l.ExpiresAt = time.UnixMicro(exp).UTC()
	}
	return f[0], l, nil
}
