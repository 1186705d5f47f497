package main

import (
	"bytes"
	"cmp"
	"context"
	"crypto/tls"
	"encoding/pem"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"strings"
	"time"

	"github.com/sluicehq/sluice/internal/config"
)

// runHealthcheck is `sluice healthcheck`: it asks --server, else
// SLUICE_SERVER, else the node configured by the same flags, SLUICE_*
// variables and --config file as `serve` (its --http-addr, on loopback
// when that listens on every address) for /readyz, or /healthz with --live, and exits 0 on 200, 1 otherwise.
// Distroless and scratch images have no curl; a Dockerfile HEALTHCHECK
// runs this.
//
// With --tls-cert-file it asks over HTTPS and, by default, accepts only
// the certificate in that file (the node reloads it at every handshake,
// so that is the one it serves), whatever names it holds. --ca-file
// verifies the chain and name instead (--server-name, else the host
// dialed); --insecure-skip-verify checks nothing, for a loopback address
// only.
//
// Every failure, an unreachable node included, exits 1: container
// runtimes reserve the other codes.
func runHealthcheck(ctx context.Context, env *environment, args []string) (err error) {
	defer func() {
		if err != nil && !errors.Is(err, flag.ErrHelp) {
			err = fmt.Errorf("%w: %w", errUnhealthy, err)
		}
	}()
	fs := flag.NewFlagSet("healthcheck", flag.ContinueOnError)
	live := fs.Bool("live", false, "ask /healthz (the process is alive) instead of /readyz (every engine reachable)")
	timeout := fs.Duration("timeout", 3*time.Second, "longest wait for the answer")
	var hc clientTLS
	fs.StringVar(&hc.caFile, "ca-file", "", "with --tls-cert-file or an https:// --server: PEM certificate authorities the node's certificate must chain to (default: accept exactly the certificate in --tls-cert-file; with --server, the system's)")
	fs.StringVar(&hc.serverName, "server-name", "", "with --ca-file: the name the node's certificate must hold (default: the host dialed)")
	fs.BoolVar(&hc.skipVerify, "insecure-skip-verify", false, "with --tls-cert-file or an https:// --server: do not check the node's certificate (loopback addresses only)")
	server := fs.String("server", "", serverUsage)
	setUsage(fs, "healthcheck [flags]", "Asks the node for /readyz (or /healthz with --live) and exits 0 on 200, 1 on anything else,\n"+
		"an unreachable node included. The node is found like every client command's server; the local\n"+
		"one is read from the same flags, SLUICE_* variables and --config file as `sluice serve`.",
		"live", "timeout", "server", "ca-file", "server-name", "insecure-skip-verify", "config", "http-addr", "tls-cert-file")
	cfg, err := loadConfigOnly(env, fs, args)
	if err != nil {
		return err
	}
	path := "/readyz"
	if *live {
		path = "/healthz"
	}
	client, url, err := healthTarget(&hc, cfg, cmp.Or(*server, env.getenv("SLUICE_SERVER")))
	if err != nil {
		return err
	}
	url += path
	ctx, cancel := context.WithTimeout(ctx, *timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return err
	}
	resp, err := client.Do(req)
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

// healthTarget returns the HTTP client and base URL to ask: the named
// server, checked with h's TLS flags, or when server is empty the local
// node cfg configures (healthClient).
func healthTarget(h *clientTLS, cfg config.Config, server string) (*http.Client, string, error) {
	if server != "" {
		hc, err := h.httpClient(server)
		if err != nil {
			return nil, "", err
		}
		return cmp.Or(hc, http.DefaultClient), strings.TrimRight(server, "/"), nil
	}
	addr := loopbackAddr(cfg.HTTPAddr)
	// With several certificates the node serves the first to a client
	// naming no host (an address), as the health check does.
	first, _, _ := strings.Cut(cfg.TLSCertFile, ",")
	hc, scheme, err := healthClient(h, strings.TrimSpace(first), addr)
	return hc, scheme + "://" + addr, err
}

// healthClient returns the HTTP client and scheme to ask addr with:
// plain HTTP when certFile (the node's --tls-cert-file) is empty, else h's
// checks, or by default the node's own certificate pinned.
func healthClient(h *clientTLS, certFile, addr string) (*http.Client, string, error) {
	if certFile == "" {
		return http.DefaultClient, "http", nil
	}
	var cfg *tls.Config
	if h.skipVerify || h.caFile != "" {
		var err error
		if cfg, err = h.config(addr); err != nil {
			return nil, "", err
		}
	} else {
		want, err := firstCertificate(certFile)
		if err != nil {
			return nil, "", fmt.Errorf("--tls-cert-file: %w", err)
		}
		// The node's own certificate, pinned: no chain or name to check.
		cfg = &tls.Config{MinVersion: tls.VersionTLS12, InsecureSkipVerify: true}
		cfg.VerifyConnection = func(cs tls.ConnectionState) error {
			if len(cs.PeerCertificates) == 0 || !bytes.Equal(cs.PeerCertificates[0].Raw, want) {
				return fmt.Errorf("the node serves a certificate other than the one in %s", certFile)
			}
			return nil
		}
	}
	return &http.Client{Transport: &http.Transport{TLSClientConfig: cfg}}, "https", nil
}

// firstCertificate returns the DER of the first certificate in a PEM file.
func firstCertificate(file string) ([]byte, error) {
	b, err := os.ReadFile(file)
	if err != nil {
		return nil, err
	}
	for {
		var block *pem.Block
		if block, b = pem.Decode(b); block == nil {
			return nil, fmt.Errorf("%s holds no PEM certificate", file)
		}
		if block.Type == "CERTIFICATE" {
			return block.Bytes, nil
		}
	}
}
