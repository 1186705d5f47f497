package shorten

import "strings"

// Device classes and operating systems a click is counted under.
const (
	DeviceDesktop = "desktop"
	DeviceMobile  = "mobile"
	DeviceTablet  = "tablet"
	DeviceBot     = "bot"
	DeviceOther   = "other"
)

// classifyAgent returns the device class and operating system of a user
// agent: a few substring rules over the tokens browsers have sent for
// years, enough for a breakdown by device. A hit classified as a bot is
// counted under the "bot" device. The rules are ordered: iPad before
// iPhone-like Safari, Android tablets (no "Mobile" token) apart from phones.
func classifyAgent(ua string, bot bool) (device, os string) {
	l := strings.ToLower(ua)
	switch {
	case strings.Contains(l, "ipad"):
		device, os = DeviceTablet, "ios"
	case strings.Contains(l, "iphone"), strings.Contains(l, "ipod"):
		device, os = DeviceMobile, "ios"
	case strings.Contains(l, "android"):
		os = "android"
		device = DeviceTablet
		if strings.Contains(l, "mobile") {
			device = DeviceMobile
		}
	case strings.Contains(l, "windows phone"):
		device, os = DeviceMobile, "windows"
	case strings.Contains(l, "windows"):
		device, os = DeviceDesktop, "windows"
	case strings.Contains(l, "cros"):
		device, os = DeviceDesktop, "chromeos"
	case strings.Contains(l, "macintosh"), strings.Contains(l, "mac os x"):
		device, os = DeviceDesktop, "macos"
	case strings.Contains(l, "linux"), strings.Contains(l, "x11"):
		device, os = DeviceDesktop, "linux"
	default:
		device, os = DeviceOther, "other"
	}
	if bot {
		device = DeviceBot
	}
	return device, os
}
