package config

import (
	"slices"
	"strings"
	"testing"
)

// TestCORSOrigins reads http.cors_origins from each source and refuses,
// naming every one, the origins a browser never sends.
func TestCORSOrigins(t *testing.T) {
	t.Parallel()
	file := yamlFile(t, "http:\n  cors_origins: [\"https://app.example.com\", \"http://localhost:3000\"]\n")
	ok := []struct {
		name string
		args []string
		env  map[string]string
		want []string
	}{
		{"default", nil, nil, nil},
		{"flag", []string{"--cors-origins", "https://a.example, http://127.0.0.1:8000"}, nil, []string{"https://a.example", "http://127.0.0.1:8000"}},
		{"environment", nil, map[string]string{"SLUICE_CORS_ORIGINS": "https://b.example"}, []string{"https://b.example"}},
		{"file", []string{"--config", file}, nil, []string{"https://app.example.com", "http://localhost:3000"}},
		{"every origin", []string{"--cors-origins", "*"}, nil, []string{"*"}},
		{"IPv6", []string{"--cors-origins", "http://[::1]:3000"}, nil, []string{"http://[::1]:3000"}},
	}
	for _, tt := range ok {
		cfg, err := load(t, tt.args, tt.env)
		if err != nil {
			t.Errorf("%s: Load() error = %v", tt.name, err)
			continue
		}
		if !slices.Equal(cfg.HTTP.CORSOrigins, tt.want) {
			t.Errorf("%s: cors_origins = %q, want %q", tt.name, cfg.HTTP.CORSOrigins, tt.want)
		}
	}

	bad := []string{
		"app.example.com", "ftp://app.example.com", "https://app.example.com/", "https://app.example.com/inbox",
		"https://App.example.com", "https://app.example.com:443", "http://app.example.com:80", "https://app.example.com:0",
		"https://*.example.com", "null", "https://user@app.example.com", "https://app.example.com?x=1", "https://bücher.example",
	}
	_, err := load(t, []string{"--cors-origins", strings.Join(bad, ",")}, nil)
	if err == nil {
		t.Fatal("Load() accepted origins no browser sends")
	}
	for _, o := range bad {
		if !strings.Contains(err.Error(), "--cors-origins: \""+o+"\"") {
			t.Errorf("the error does not name %q:\n%v", o, err)
		}
	}
	if !strings.Contains(err.Error(), `"null" would admit sandboxed frames`) {
		t.Errorf("the error does not refuse null:\n%v", err)
	}
	if _, err := load(t, []string{"--cors-origins", "*,https://a.example"}, nil); err == nil || !strings.Contains(err.Error(), "list it alone") {
		t.Errorf("* with another origin: Load() error = %v, want one saying to list it alone", err)
	}
}
