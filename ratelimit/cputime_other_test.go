//go:build !unix

package ratelimit_test

func cpuTime() int64 { return 0 }
