//go:build pprof

package main

import (
	"log"
	"net/http"
	_ "net/http/pprof" // registers /debug/pprof/ on http.DefaultServeMux
	"os"
)

// A binary built with -tags pprof serves net/http/pprof on
// $SLUICE_PPROF_ADDR (a loopback address such as 127.0.0.1:6060), to
// profile `sluice serve` under an external load generator such as wrk
// (docs/benchmarks.md). Release builds leave it out.
func init() {
	addr := os.Getenv("SLUICE_PPROF_ADDR")
	if addr == "" {
		return
	}
	go func() { log.Print(http.ListenAndServe(addr, nil)) }()
}
