package envoyrls

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"os"
	"time"
)

// Watcher reloads a Server's Config when the files under a path change.
// It polls: every .yaml/.yml file of the folder (or the one file) is read
// and hashed, so edits, new files, removed files and Kubernetes ConfigMap
// symlink swaps are all seen, whatever the file system's mtime resolution,
// and no dependency on inotify is needed. A change is loaded with
// Server.Reload: a bad one is logged once and the previous rules stay in
// force until the files change again.
//
// A Watcher is used by one goroutine at a time (Run, or a test calling
// Poll); its zero value is not usable (use NewWatcher).
type Watcher struct {
	server *Server
	path   string
	last   string
}

// NewWatcher returns a Watcher of path for s, taking the files as they are
// now as already loaded.
func NewWatcher(s *Server, path string) *Watcher {
	return &Watcher{server: s, path: path, last: fingerprint(path)}
}

// Poll reloads the configuration if the files changed since the last poll.
// It reports whether it tried, and the reload's error.
func (w *Watcher) Poll() (reloaded bool, err error) {
	fp := fingerprint(w.path)
	if fp == w.last {
		return false, nil
	}
	w.last = fp
	return true, w.server.Reload(w.path)
}

// Run polls every interval (every second if 0) until ctx ends.
func (w *Watcher) Run(ctx context.Context, interval time.Duration) error {
	if interval <= 0 {
		interval = time.Second
	}
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
			w.Poll() // Reload logs and counts failures
		}
	}
}

// fingerprint hashes the names and contents of the files Load would read,
// or describes why they cannot be listed.
func fingerprint(path string) string {
	files, err := configFiles(path)
	if err != nil {
		return "error: " + err.Error()
	}
	h := sha256.New()
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			return "error: " + err.Error()
		}
		h.Write([]byte(f))
		h.Write([]byte{0})
		h.Write(data)
		h.Write([]byte{0})
	}
	return hex.EncodeToString(h.Sum(nil))
}
