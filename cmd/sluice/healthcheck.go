package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"time"
)

func init() {
	commands["healthcheck"] = command{"exit 0 when the local node is ready (GET /readyz), for container health checks", runHealthcheck}
}

// runHealthcheck is `sluice healthcheck`: it asks the node configured by
// the same flags, SLUICE_* variables and --config file as `serve` (its
// --http-addr, on loopback when that listens on every address) for
// /readyz, or /healthz with --live, and exits 0 on 200, 1 otherwise.
// Distroless and scratch images have no curl; a Dockerfile HEALTHCHECK
// runs this.
func runHealthcheck(ctx context.Context, env *environment, args []string) error {
	fs := flag.NewFlagSet("healthcheck", flag.ContinueOnError)
	live := fs.Bool("live", false, "ask /healthz (the process is alive) instead of /readyz (every engine reachable)")
	timeout := fs.Duration("timeout", 3*time.Second, "longest wait for the answer")
	cfg, _, err := loadConfig(env, fs, args)
	if err != nil {
		return err
	}
	path := "/readyz"
	if *live {
		path = "/healthz"
	}
	url := "http://" + loopbackAddr(cfg.HTTPAddr) + path
	ctx, cancel := context.WithTimeout(ctx, *timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return fmt.Errorf("GET %s: %w", url, err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 4<<10))
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("GET %s: %s: %s", url, resp.Status, body)
	}
	fmt.Fprintf(env.stdout, "%s %s\n", path, resp.Status)
	return nil
}

// loopbackAddr turns a listen address into one to dial from the same host:
// an unspecified host (":8080", "0.0.0.0:8080", "[::]:8080") becomes
// loopback.
func loopbackAddr(listen string) string {
	host, port, err := net.SplitHostPort(listen)
	if err != nil {
		return listen
	}
	switch host {
	case "", "0.0.0.0":
		host = "127.0.0.1"
	case "::":
		host = "::1"
	}
	return net.JoinHostPort(host, port)
}
