package shorten

import (
	"net/url"
	"strings"
	"sync"

	"github.com/medama-io/go-useragent"
	"github.com/medama-io/go-useragent/agents"
)

// uaParser is built on first use (a trie of known agents, some
// milliseconds), so a server whose links have no device or OS rules never
// pays for it.
var uaParser = sync.OnceValue(useragent.NewParser)

var (
	deviceBits = map[agents.Device]uint8{agents.DeviceDesktop: devices["desktop"], agents.DeviceMobile: devices["mobile"],
		agents.DeviceTablet: devices["tablet"], agents.DeviceTV: devices["tv"], agents.DeviceBot: devices["bot"]}
	systemBits = map[agents.OS]uint16{agents.OSAndroid: systems["android"], agents.OSIOS: systems["ios"],
		agents.OSMacOS: systems["macos"], agents.OSWindows: systems["windows"], agents.OSLinux: systems["linux"],
		agents.OSChromeOS: systems["chromeos"], agents.OSFreeBSD: systems["freebsd"], agents.OSOpenBSD: systems["openbsd"]}
)

// parseUserAgent gives the device class and operating system of a
// User-Agent as bits of devices and systems (0 for unknown).
//
// The parser takes every Android device for a phone; Android's own
// convention (browsers on phones say "Mobile", on tablets they do not)
// tells tablets apart.
func parseUserAgent(ua string) (device uint8, os uint16) {
	a := uaParser().Parse(ua)
	device, os = deviceBits[a.Device()], systemBits[a.OS()]
	if os == systems["android"] && device == devices["mobile"] && !strings.Contains(ua, "Mobile") {
		device = devices["tablet"]
	}
	return device, os
}

// botBit is the bot device class. Beyond what the parser knows, it covers
// what ClassifyHit takes for a bot (link-preview fetchers, scanners,
// tools), asked only of rules naming bot.
var botBit = devices["bot"]

func unescapeQuery(s string) string {
	if u, err := url.QueryUnescape(s); err == nil {
		return u
	}
	return s
}

// Device classes a click is counted under (beside "tv", which the parser
// also knows).
const (
	DeviceDesktop = "desktop"
	DeviceMobile  = "mobile"
	DeviceTablet  = "tablet"
	DeviceBot     = "bot"
	DeviceOther   = "other"
)

// classifyAgent returns the device class and operating system a click is
// counted under, from the same parser the redirect rules use, so a rule
// for "mobile" and the stats' "mobile" row agree. A hit classified as a
// bot (ClassifyHit) is counted under the "bot" device; what the parser
// does not know is "other".
func classifyAgent(ua string, bot bool) (device, os string) {
	d, o := parseUserAgent(ua)
	device, os = nameOfBit(devices, d), nameOfBit(systems, o)
	if bot {
		device = DeviceBot
	}
	return device, os
}

// nameOfBit is the name whose bit is b, or "other".
func nameOfBit[B uint8 | uint16](names map[string]B, b B) string {
	for n, v := range names {
		if v == b && b != 0 {
			return n
		}
	}
	return DeviceOther
}
