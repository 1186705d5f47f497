package deploy

import (
	"net/url"
	"regexp"
	"sort"
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"
)

// compose is the part of a Compose file the test reads.
type compose struct {
	Services map[string]struct {
		Image       string            `yaml:"image"`
		Build       any               `yaml:"build"`
		Command     []string          `yaml:"command"`
		Environment map[string]string `yaml:"environment"`
		Ports       []string          `yaml:"ports"`
		DependsOn   any               `yaml:"depends_on"` // a list or a map
		StopGrace   string            `yaml:"stop_grace_period"`
	} `yaml:"services"`
}

// TestComposeScaleOutSet parses docker-compose.yaml: three Sluice nodes
// built from the Dockerfile and sharing PostgreSQL, Redis and NATS, HAProxy
// in front; every SLUICE_* variable is a real setting and every engine URL
// names a service of the file; HAProxy's config names the three nodes.
func TestComposeScaleOutSet(t *testing.T) {
	t.Parallel()
	var c compose
	if err := yaml.Unmarshal([]byte(read(t, "docker-compose.yaml")), &c); err != nil {
		t.Fatalf("docker-compose.yaml: %v", err)
	}
	var names []string
	for name := range c.Services {
		names = append(names, name)
	}
	sort.Strings(names)
	if got, want := strings.Join(names, " "), "haproxy nats postgres redis sluice-1 sluice-2 sluice-3"; got != want {
		t.Fatalf("services = %s; want %s", got, want)
	}
	haproxy := read(t, "deploy/compose/haproxy.cfg")
	for _, node := range []string{"sluice-1", "sluice-2", "sluice-3"} {
		s := c.Services[node]
		if s.Build == nil {
			t.Errorf("%s is not built from the Dockerfile", node)
		}
		checkEnv(t, "docker-compose.yaml "+node, s.Environment)
		for _, v := range []string{"SLUICE_DATABASE_URL", "SLUICE_REDIS_URL", "SLUICE_NATS_URL"} {
			u, err := url.Parse(s.Environment[v])
			if err != nil || c.Services[u.Hostname()].Image == "" {
				t.Errorf("%s %s = %q; want a URL naming a service of the file", node, v, s.Environment[v])
			}
		}
		if s.Environment["SLUICE_RATELIMIT_NODES"] != "3" {
			t.Errorf("%s SLUICE_RATELIMIT_NODES = %q; want 3, the node count", node, s.Environment["SLUICE_RATELIMIT_NODES"])
		}
		if !strings.HasPrefix(s.Environment["SLUICE_WEBHOOK_SECRET"], "${SLUICE_WEBHOOK_SECRET:-whsec_") {
			t.Errorf("%s has no shared webhook secret; each node would generate its own", node)
		}
		if deps, _ := s.DependsOn.(map[string]any); deps["postgres"] == nil {
			t.Errorf("%s does not wait for postgres", node)
		}
		for _, port := range []string{"8080", "8081"} {
			if !regexp.MustCompile(`server ` + node + ` ` + node + `:` + port + `\b`).MatchString(haproxy) {
				t.Errorf("deploy/compose/haproxy.cfg does not send to %s:%s", node, port)
			}
		}
	}
	if len(c.Services["haproxy"].Ports) != 2 {
		t.Errorf("haproxy ports = %v; want HTTP and gRPC published", c.Services["haproxy"].Ports)
	}
	if !strings.Contains(strings.Join(c.Services["nats"].Command, " "), "-js") {
		t.Error("nats runs without JetStream (-js)")
	}
	if trusted := c.Services["sluice-1"].Environment["SLUICE_TRUSTED_PROXIES"]; !strings.Contains(read(t, "docker-compose.yaml"), "ipv4_address: "+trusted) {
		t.Errorf("SLUICE_TRUSTED_PROXIES = %q is not HAProxy's address", trusted)
	}
}
