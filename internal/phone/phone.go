// Package phone parses phone numbers with github.com/nyaruka/phonenumbers,
// a maintained Go port of Google's libphonenumber: the country a number
// belongs to, whether it is a valid number there, and its type (mobile,
// fixed line, premium rate, shared cost, ...), from the metadata
// libphonenumber keeps for every numbering plan. Sluice's SMS-pumping
// guard (internal/notify) decides on these.
package phone

import (
	"errors"
	"strings"

	"github.com/nyaruka/phonenumbers"
)

// Type is a number's type as libphonenumber classifies it.
type Type string

// The types; Unknown covers numbers libphonenumber cannot place.
const (
	FixedLine         Type = "fixed_line"
	Mobile            Type = "mobile"
	FixedLineOrMobile Type = "fixed_line_or_mobile"
	TollFree          Type = "toll_free"
	PremiumRate       Type = "premium_rate"
	SharedCost        Type = "shared_cost"
	VoIP              Type = "voip"
	Personal          Type = "personal"
	Pager             Type = "pager"
	UAN               Type = "uan"
	Voicemail         Type = "voicemail"
	Unknown           Type = "unknown"
)

// Types lists every type.
var Types = []Type{FixedLine, Mobile, FixedLineOrMobile, TollFree, PremiumRate, SharedCost, VoIP, Personal, Pager, UAN, Voicemail, Unknown}

var types = map[phonenumbers.PhoneNumberType]Type{
	phonenumbers.FIXED_LINE: FixedLine, phonenumbers.MOBILE: Mobile, phonenumbers.FIXED_LINE_OR_MOBILE: FixedLineOrMobile,
	phonenumbers.TOLL_FREE: TollFree, phonenumbers.PREMIUM_RATE: PremiumRate, phonenumbers.SHARED_COST: SharedCost,
	phonenumbers.VOIP: VoIP, phonenumbers.PERSONAL_NUMBER: Personal, phonenumbers.PAGER: Pager,
	phonenumbers.UAN: UAN, phonenumbers.VOICEMAIL: Voicemail,
}

// Number is a parsed number.
type Number struct {
	// E164 is the number normalised to E.164: "+", the country code and
	// the national number, digits only.
	E164 string
	// Country is the ISO 3166-1 alpha-2 region the number belongs to
	// ("US", "GB", "DE"); empty when libphonenumber cannot place it (an
	// invalid number).
	Country string
	// Valid reports whether the number is a valid number of its country's
	// numbering plan.
	Valid bool
	Type  Type
}

// Digits returns the number's E.164 digits without the "+".
func (n Number) Digits() string { return strings.TrimPrefix(n.E164, "+") }

// ErrNotNumber is returned for input that is not a phone number at all.
var ErrNotNumber = errors.New("not an international phone number")

// MaxLen bounds the input Parse reads.
const MaxLen = 64

// Parse parses an international number: "+" and the country code first
// (spaces, dots, dashes and parentheses between digits are allowed, as
// libphonenumber allows them). A number whose country code exists but
// whose digits fit no plan parses with Valid false; input that is not a
// number, has no "+", or is longer than MaxLen fails with ErrNotNumber.
func Parse(s string) (Number, error) {
	s = strings.TrimSpace(s)
	if len(s) > MaxLen || !strings.HasPrefix(s, "+") {
		return Number{}, ErrNotNumber
	}
	pn, err := phonenumbers.Parse(s, "ZZ") // ZZ: unknown region; the "+" names the country
	if err != nil {
		return Number{}, ErrNotNumber
	}
	n := Number{E164: phonenumbers.Format(pn, phonenumbers.E164), Type: Unknown}
	if phonenumbers.IsValidNumber(pn) {
		n.Valid = true
		n.Country = phonenumbers.GetRegionCodeForNumber(pn)
		if t, ok := types[phonenumbers.GetNumberType(pn)]; ok {
			n.Type = t
		}
	}
	return n, nil
}

// KnownCountry reports whether code is a region libphonenumber has a
// numbering plan for ("US", "GB"), for validating configuration.
func KnownCountry(code string) bool {
	return phonenumbers.GetCountryCodeForRegion(code) != 0
}
