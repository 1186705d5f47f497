package config

import (
	"flag"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestConfigFileErrorsNameKeysNotTypes: a mistake in the YAML file is
// reported by line and key, in the file's words, never by Go type.
func TestConfigFileErrorsNameKeysNotTypes(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name, yaml, want string
	}{
		{"typo", "log_level: info\nlgo_format: json\n", `line 2: unknown key "lgo_format"`},
		{"nested typo", "notify:\n  retry:\n    bsae: 1s\n", `line 3: unknown key "bsae"`},
		{"wrong kind", "shutdown_timeout: [1]\n", "line 1: a list is not a duration like 30s or 5m"},
		{"wrong scalar", "shutdown_timeout: soon\n", "line 1: "},
		{"syntax", "log_level: info\n  bad: : x\n", "line 2: "},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			file := filepath.Join(t.TempDir(), "sluice.yaml")
			if err := os.WriteFile(file, []byte(tt.yaml), 0o600); err != nil {
				t.Fatal(err)
			}
			fs := flag.NewFlagSet("serve", flag.ContinueOnError)
			fs.SetOutput(io.Discard)
			_, _, err := Load(fs, []string{"--config", file}, func(string) string { return "" })
			if err == nil {
				t.Fatalf("Load(%q) = nil error", tt.yaml)
			}
			msg, ok := strings.CutPrefix(err.Error(), "configuration file "+file+": ")
			if !ok || !strings.HasPrefix(msg, tt.want) || strings.Contains(msg, "config.") || strings.Contains(msg, "yaml:") || strings.Contains(msg, "time.") {
				t.Errorf("Load(%q) = %q, want %q after the file name and no Go type", tt.yaml, msg, tt.want)
			}
		})
	}
}
