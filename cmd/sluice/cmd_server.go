package main

import (
	"cmp"
	"flag"
	"io"

	"github.com/sluicehq/sluice/client"
	"github.com/sluicehq/sluice/internal/config"
)

// serverUsage is --server's help, the one rule every command that talks to
// a server follows (serverURL).
const serverUsage = "Sluice server URL (default $SLUICE_SERVER, else the local node's address: --http-addr as `sluice serve` reads it from SLUICE_HTTP_ADDR or the --config / SLUICE_CONFIG file, else " + client.DefaultServer + ")"

// serverURL is where a command finds the server: --server (flagValue),
// else SLUICE_SERVER, else the local node (localServer).
func serverURL(env *environment, flagValue string) string {
	if s := cmp.Or(flagValue, env.getenv("SLUICE_SERVER")); s != "" {
		return s
	}
	fs := flag.NewFlagSet("", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	flags := config.NewFlags(fs)
	if err := fs.Parse(nil); err != nil {
		return client.DefaultServer
	}
	cfg, _ := flags.Config(env.getenv) // a bad setting elsewhere does not hide the address
	return localServer(cfg)
}

// localServer is the URL of the node cfg configures on this host: its
// --http-addr (loopback when it listens on every address), https when it
// serves TLS. The default configuration gives client.DefaultServer.
func localServer(cfg config.Config) string {
	scheme := "http"
	if cfg.TLSCertFile != "" {
		scheme = "https"
	}
	return scheme + "://" + loopbackAddr(cmp.Or(cfg.HTTPAddr, config.Default().HTTPAddr))
}
