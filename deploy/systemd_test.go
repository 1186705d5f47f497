package deploy

import (
	"strings"
	"testing"
	"time"
)

// TestSystemdUnit reads deploy/systemd/sluice.service: it runs `sluice
// serve` under a dynamic user with its state directory as the data dir,
// with the hardening options on, real SLUICE_* variables, and a stop
// timeout longer than the drain and the shutdown timeout.
// (.ci/systemd-verify runs systemd-analyze verify on it.)
func TestSystemdUnit(t *testing.T) {
	t.Parallel()
	set := map[string]string{}
	env := map[string]string{}
	for line := range strings.SplitSeq(read(t, "deploy/systemd/sluice.service"), "\n") {
		k, v, ok := strings.Cut(strings.TrimSpace(line), "=")
		if !ok || strings.HasPrefix(k, "#") || strings.HasPrefix(k, "[") {
			continue
		}
		if k == "Environment" {
			ek, ev, _ := strings.Cut(v, "=")
			env[ek] = ev
			continue
		}
		set[k] = v
	}
	for k, want := range map[string]string{
		"ExecStart": "/usr/local/bin/sluice serve", "DynamicUser": "yes", "StateDirectory": "sluice",
		"ProtectSystem": "strict", "ProtectHome": "yes", "NoNewPrivileges": "yes", "PrivateTmp": "yes",
		"PrivateDevices": "yes", "CapabilityBoundingSet": "", "KillSignal": "SIGTERM",
	} {
		if got, ok := set[k]; !ok || got != want {
			t.Errorf("%s=%q; want %s=%s", k, got, k, want)
		}
	}
	checkEnv(t, "the systemd unit", env)
	if env["SLUICE_DATA_DIR"] != "/var/lib/"+set["StateDirectory"] {
		t.Errorf("SLUICE_DATA_DIR = %q; want the StateDirectory /var/lib/%s (the only writable path under ProtectSystem=strict)", env["SLUICE_DATA_DIR"], set["StateDirectory"])
	}
	drain, err1 := time.ParseDuration(env["SLUICE_DRAIN_DELAY"])
	shutdown, err2 := time.ParseDuration(env["SLUICE_SHUTDOWN_TIMEOUT"])
	stop, err3 := time.ParseDuration(set["TimeoutStopSec"])
	if err1 != nil || err2 != nil || err3 != nil || stop <= drain+shutdown {
		t.Errorf("TimeoutStopSec=%s with drain %s and shutdown %s; want longer than the two", set["TimeoutStopSec"], env["SLUICE_DRAIN_DELAY"], env["SLUICE_SHUTDOWN_TIMEOUT"])
	}
}
