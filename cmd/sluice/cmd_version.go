package main

import (
	"context"
	"flag"
	"fmt"
	"runtime"
	"runtime/debug"
	"strings"

	"github.com/prometheus/client_golang/prometheus"
)

// version is set at build time for releases:
// -ldflags "-X main.version=v1.2.3". Empty, the main module's version from
// the build info is used (`go install ...@v1.2.3` sets it), and for a build
// from a checkout, dev-<revision>[-dirty].
var version = ""

// build describes the running binary, from the build info the Go toolchain
// embeds (runtime/debug.ReadBuildInfo) and the -X override above.
type build struct {
	Version  string // v1.2.3, or dev-<revision>[-dirty], or dev
	Revision string // VCS commit, or "unknown" (go build -buildvcs=false, or no checkout)
	Time     string // commit time (RFC 3339), or "unknown"
	Modified bool   // the checkout had uncommitted changes
	// VCS is whether the build info says anything of the checkout
	// (vcs.modified); without it, Modified is unknown, not false.
	VCS       bool
	GoVersion string
}

// readBuild reads the binary's build info once per call.
func readBuild() build {
	b := build{Revision: "unknown", Time: "unknown", GoVersion: runtime.Version()}
	info, ok := debug.ReadBuildInfo()
	if ok {
		for _, s := range info.Settings {
			switch s.Key {
			case "vcs.revision":
				b.Revision = s.Value
			case "vcs.time":
				b.Time = s.Value
			case "vcs.modified":
				b.Modified, b.VCS = s.Value == "true", true
			}
		}
	}
	switch {
	case version != "":
		b.Version = version
	case ok && info.Main.Version != "" && info.Main.Version != "(devel)":
		b.Version = info.Main.Version
	case b.Revision != "unknown":
		b.Version = "dev-" + b.Revision[:min(12, len(b.Revision))]
		if b.Modified {
			b.Version += "-dirty"
		}
	default:
		b.Version = "dev"
	}
	return b
}

// buildVersion is the version /healthz and the logs report.
func buildVersion() string { return readBuild().Version }

func runVersion(_ context.Context, env *environment, args []string) error {
	fs := flag.NewFlagSet("version", flag.ContinueOnError)
	fs.SetOutput(env.stderr)
	setUsage(fs, "version", "Prints the version, VCS revision and Go version of this build.")
	if _, err := parseArgs(env, fs, args); err != nil {
		return err
	}
	b := readBuild()
	fmt.Fprintln(env.stdout, "sluice", b.Version)
	fmt.Fprintln(env.stdout, "  revision:", b.Revision)
	fmt.Fprintln(env.stdout, "  built from a commit of:", b.Time)
	if b.VCS { // else nobody knows: say nothing rather than "false"
		fmt.Fprintln(env.stdout, "  modified:", b.Modified)
	}
	fmt.Fprintln(env.stdout, "  go:", strings.TrimPrefix(b.GoVersion, "go"), runtime.GOOS+"/"+runtime.GOARCH)
	return nil
}

// registerBuildInfo adds sluice_build_info, always 1, labelled with the
// version, the VCS revision and the Go version.
func registerBuildInfo(reg prometheus.Registerer) {
	b := readBuild()
	g := prometheus.NewGauge(prometheus.GaugeOpts{
		Name:        "sluice_build_info",
		Help:        "Always 1; the labels say which build of Sluice runs.",
		ConstLabels: prometheus.Labels{"version": b.Version, "revision": b.Revision, "goversion": b.GoVersion},
	})
	g.Set(1)
	reg.MustRegister(g)
}
