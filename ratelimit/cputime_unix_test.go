//go:build unix

package ratelimit_test

import "syscall"

// cpuTime returns the process's user and system CPU time in ns, or 0.
func cpuTime() int64 {
	var ru syscall.Rusage
	if syscall.Getrusage(syscall.RUSAGE_SELF, &ru) != nil {
		return 0
	}
	return ru.Utime.Nano() + ru.Stime.Nano()
}
