// Package geoip locates client addresses in a local MaxMind-format
// database: GeoLite2 or DB-IP lite, Country or City, downloaded by the
// operator and named in links.geoip_db. [DB] implements shorten.Geo, and
// reloads the file when it changes (Watch), so a monthly update needs no
// restart.
package geoip

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/netip"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/oschwald/maxminddb-golang/v2"
)

// MaxFileSize bounds the database read into memory; GeoLite2-City is
// about 70 MB.
const MaxFileSize = 1 << 30

// DefaultCheckInterval is how often Run looks at the file's modification
// time and size.
const DefaultCheckInterval = time.Minute

// DB is a GeoIP database read from a file. It is safe for concurrent use;
// a reload swaps the whole database at once, and lookups in flight finish
// on the one they started with.
//
// The file is read into memory rather than memory-mapped: a mapped file
// replaced in place shows readers half of each version, and unmapping the
// old one under a lookup in flight would crash it.
type DB struct {
	path string
	log  *slog.Logger
	cur  atomic.Pointer[maxminddb.Reader]
	// seen is the file's modification time and size when last read
	// (successfully or not), under mu, which serializes reloads.
	mu   sync.Mutex
	seen struct {
		mod  time.Time
		size int64
	}
}

// Open reads the database at path. It fails when the file is missing or
// is not a MaxMind database: a configured database that cannot be read is
// a mistake to report at start, not to discover in the redirects. If log
// is nil, reloads are not logged.
func Open(path string, log *slog.Logger) (*DB, error) {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	d := &DB{path: path, log: log}
	if _, err := d.Reload(); err != nil {
		return nil, err
	}
	return d, nil
}

// Locate returns addr's country (ISO 3166-1 alpha-2) and, from a City
// database, its city's English name; "" for what the database does not
// know. It implements shorten.Geo.
func (d *DB) Locate(addr netip.Addr) (country, city string) {
	r := d.cur.Load()
	res := r.Lookup(addr.Unmap())
	if !res.Found() {
		return "", ""
	}
	// Errors leave the value empty: a record without the field is a
	// record that does not know it.
	_ = res.DecodePath(&country, "country", "iso_code")
	_ = res.DecodePath(&city, "city", "names", "en")
	return country, city
}

// Reload reads the file again if its modification time or size changed
// since it was last read, and reports whether it did. A file that does not
// read leaves the current database in place; it is tried again once it
// changes again (a copy still being written).
func (d *DB) Reload() (bool, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	fi, err := os.Stat(d.path)
	if err != nil {
		return false, fmt.Errorf("geoip database: %w", err)
	}
	if d.cur.Load() != nil && fi.ModTime().Equal(d.seen.mod) && fi.Size() == d.seen.size {
		return false, nil
	}
	d.seen.mod, d.seen.size = fi.ModTime(), fi.Size()
	r, err := read(d.path)
	if err != nil {
		return false, fmt.Errorf("geoip database %s: %w", d.path, err)
	}
	d.cur.Store(r)
	d.log.Info("geoip database loaded", slog.String("path", d.path), slog.String("type", r.Metadata.DatabaseType),
		slog.Time("built", r.Metadata.BuildTime()))
	return true, nil
}

func read(path string) (*maxminddb.Reader, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, MaxFileSize+1))
	if err != nil {
		return nil, err
	}
	if len(b) > MaxFileSize {
		return nil, fmt.Errorf("larger than %d bytes", MaxFileSize)
	}
	r, err := maxminddb.OpenBytes(b)
	if err != nil {
		return nil, err
	}
	if r.Metadata.IPVersion != 4 && r.Metadata.IPVersion != 6 {
		return nil, errors.New("not a MaxMind database")
	}
	return r, nil
}

// Watch reloads the database on every tick, until ctx ends; failures are
// logged and the current database kept.
func (d *DB) Watch(ctx context.Context, ticks <-chan time.Time) {
	for {
		select {
		case <-ctx.Done():
			return
		case <-ticks:
			if _, err := d.Reload(); err != nil {
				d.log.Warn("geoip database reload failed; keeping the one loaded", slog.Any("error", err))
			}
		}
	}
}

// Run is Watch on a ticker of interval (DefaultCheckInterval if zero),
// until ctx ends. It returns nil.
func (d *DB) Run(ctx context.Context, interval time.Duration) error {
	t := time.NewTicker(cmp.Or(interval, DefaultCheckInterval))
	defer t.Stop()
	d.Watch(ctx, t.C)
	return nil
}
