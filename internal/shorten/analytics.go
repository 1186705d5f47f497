package shorten

import (
	"net/url"
	"strings"
)

// Source says how a visitor reached a link.
type Source uint8

// Sources of a hit. The QR code of a link encodes its short URL with
// "?src=qr", so that scans are counted apart from clicks.
const (
	SourceLink Source = iota // the short URL itself
	SourceQR                 // a scan of the link's QR code
)

// QRMarker is the query the QR code adds to the short URL.
const QRMarker = "src=qr"

func (s Source) String() string {
	if s == SourceQR {
		return "qr"
	}
	return "link"
}

// Dim is a dimension stats group clicks by; its value is the stored code
// (link_rollups.dim), so the numbers never change.
type Dim uint8

// Dimensions of a click.
const (
	DimCountry  Dim = 1
	DimDevice   Dim = 2
	DimOS       Dim = 3
	DimReferrer Dim = 4
	DimLanguage Dim = 5
	DimSource   Dim = 6
	DimTarget   Dim = 7
)

// Dims lists the dimensions in a stable order, and DimNames their names in
// the API (the group parameter).
var (
	Dims     = []Dim{DimCountry, DimDevice, DimOS, DimReferrer, DimLanguage, DimSource, DimTarget}
	DimNames = map[Dim]string{DimCountry: "country", DimDevice: "device", DimOS: "os",
		DimReferrer: "referrer", DimLanguage: "language", DimSource: "source", DimTarget: "target"}
)

// ParseDim returns the dimension named name.
func ParseDim(name string) (Dim, bool) {
	for d, n := range DimNames {
		if n == name {
			return d, true
		}
	}
	return 0, false
}

// HitDetails are the request's parts a hit's dimensions come from, taken
// from the Request by Service.Redirect and classified later, in the
// flusher.
type HitDetails struct {
	Source Source
	// Referer and AcceptLanguage are the request's headers, as sent.
	Referer, AcceptLanguage string
	// ClickID is the click id appended to the target, if any (clickid.go).
	ClickID string
}

// Dimensions are a click's dimensions, in their stored, compact form.
type Dimensions struct {
	Source Source
	// Country is an ISO 3166-1 alpha-2 code in capitals, from
	// Options.Country; empty when unknown or no lookup is configured.
	Country string
	// Device and OS come from the user agent (useragent.go).
	Device string
	OS     string
	// Referrer is the referring page's host only, at most 100 bytes; empty
	// for none (links opened from SMS and apps send none).
	Referrer string
	// Language is the first language of Accept-Language, two lower-case
	// letters; empty when absent.
	Language string
	// ClickID is set for clicks of links with click ids.
	ClickID string
	// Target is the label of the redirect rule that picked the target
	// (Target.Rule): "" for a link without rules.
	Target string
}

// Value returns the click's value in dimension d.
func (d Dimensions) Value(dim Dim) string {
	switch dim {
	case DimCountry:
		return d.Country
	case DimDevice:
		return d.Device
	case DimOS:
		return d.OS
	case DimReferrer:
		return d.Referrer
	case DimLanguage:
		return d.Language
	case DimSource:
		return d.Source.String()
	case DimTarget:
		return d.Target
	}
	return ""
}

// maxReferrer bounds a stored referrer host.
const maxReferrer = 100

// referrerHost is the host of a Referer header, lower-cased and bounded.
func referrerHost(ref string) string {
	if ref == "" {
		return ""
	}
	u, err := url.Parse(ref)
	if err != nil || u.Host == "" {
		return ""
	}
	h := strings.ToLower(u.Hostname())
	if len(h) > maxReferrer {
		h = h[:maxReferrer]
	}
	return h
}

// firstLanguage is the primary subtag of the first language named in an
// Accept-Language header ("fr-CH, fr;q=0.9" gives "fr"), or "" when it is
// not two ASCII letters.
func firstLanguage(h string) string {
	tag, _, _ := strings.Cut(h, ",")
	tag, _, _ = strings.Cut(tag, ";")
	tag, _, _ = strings.Cut(strings.TrimSpace(tag), "-")
	if len(tag) != 2 {
		return ""
	}
	tag = strings.ToLower(tag)
	if tag[0] < 'a' || tag[0] > 'z' || tag[1] < 'a' || tag[1] > 'z' {
		return ""
	}
	return tag
}

// validCountry reports whether c is two capital ASCII letters.
func validCountry(c string) bool {
	return len(c) == 2 && c[0] >= 'A' && c[0] <= 'Z' && c[1] >= 'A' && c[1] <= 'Z'
}

// dimCache classifies the hits of one flush, each user agent and client
// once: a batch holds few distinct ones.
type dimCache struct {
	country func(string) string
	agents  map[[2]string][2]string // (ua, bot) -> (device, os)
	places  map[string]string
}

func newDimCache(country func(string) string) *dimCache {
	return &dimCache{country: country, agents: map[[2]string][2]string{}, places: map[string]string{}}
}

func (c *dimCache) of(h Hit, bot bool) Dimensions {
	ak := [2]string{h.UserAgent, ""}
	if bot {
		ak[1] = "bot"
	}
	a, ok := c.agents[ak]
	if !ok {
		a[0], a[1] = classifyAgent(h.UserAgent, bot)
		c.agents[ak] = a
	}
	d := Dimensions{Source: h.Source, Device: a[0], OS: a[1], Referrer: referrerHost(h.Referer),
		Language: firstLanguage(h.AcceptLanguage), ClickID: h.ClickID, Target: h.Target}
	if c.country != nil {
		cc, ok := c.places[h.Client]
		if !ok {
			if cc = strings.ToUpper(c.country(h.Client)); !validCountry(cc) {
				cc = ""
			}
			c.places[h.Client] = cc
		}
		d.Country = cc
	}
	return d
}
