// Package web holds the dashboard and the end-user preference page: plain
// HTML, CSS and JavaScript modules embedded in the binary, so /ui/ works on
// machines without internet access (no CDN, no build step). Charts are
// drawn as SVG by static/chart.js; nothing is vendored.
//
// The HTTP adapter serves Files at /ui/ (see httpapi.UIOptions); the pages
// call the JSON API with the session cookie set by POST /v1/session.
package web

import (
	"embed"
	"io/fs"
)

//go:embed static
var static embed.FS

// Files returns the dashboard's files, rooted at static/ (index.html,
// preferences.html, the scripts and the stylesheet).
func Files() fs.FS {
	sub, err := fs.Sub(static, "static")
	if err != nil {
		panic(err) // the directory is embedded above
	}
	return sub
}
