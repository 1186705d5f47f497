package main

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"

	"github.com/sluicehq/sluice/internal/config"
)

// dataDirLockFile is the file in the data dir whose lock a serving node
// holds; it holds that node's pid.
const dataDirLockFile = "sluice.lock"

// usesDataDir reports whether a node of cfg keeps its records or queues
// in cfg.DataDir: the SQLite database without --database-url, the
// embedded NATS store without --nats-url. With both external, the dir
// holds at most the generated webhook signing secret, which nodes may
// share, and is not locked.
func usesDataDir(cfg config.Config) bool { return cfg.DatabaseURL == "" || cfg.NATSURL == "" }

// lockDataDir takes an exclusive lock on dir (flock on dir/sluice.lock,
// created with dir if missing) and writes this process's pid in the
// file. When another process holds it, lockDataDir fails at once with an
// error naming dir and that process's pid. The lock lasts until release
// is called or the process ends, however it ends: the kernel drops it
// with the file's last descriptor, so a crashed node leaves no stale
// lock.
func lockDataDir(dir string) (release func() error, err error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("data dir %s: %w", dir, err)
	}
	path := filepath.Join(dir, dataDirLockFile)
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, fmt.Errorf("data dir %s: %w", dir, err)
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		f.Close()
		if errors.Is(err, syscall.EWOULDBLOCK) {
			holder := "pid unknown"
			if b, err := os.ReadFile(path); err == nil && strings.TrimSpace(string(b)) != "" {
				holder = "pid " + strings.TrimSpace(string(b))
			}
			return nil, fmt.Errorf("data dir %s is in use by another sluice (%s); stop it, or give this one a --data-dir of its own", dir, holder)
		}
		return nil, fmt.Errorf("lock data dir %s: %w", dir, err)
	}
	if err = f.Truncate(0); err == nil {
		_, err = f.WriteAt([]byte(strconv.Itoa(os.Getpid())+"\n"), 0)
	}
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("data dir %s: write %s: %w", dir, dataDirLockFile, err)
	}
	return f.Close, nil
}
