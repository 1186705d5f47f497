package deploy

import (
	"bytes"
	"errors"
	"flag"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/sluicehq/sluice/internal/config"
	"github.com/sluicehq/sluice/internal/enginetest"
	"github.com/sluicehq/sluice/internal/tlsconf/tlstest"
)

// helmModule is the helm CI and `make deploy-check` use (builds on Go 1.26).
const helmModule = "helm.sh/helm/v3/cmd/helm@v3.22.0"

const chart = root + "/deploy/helm/sluice"

// manifest is one rendered Kubernetes object, as generic YAML.
type manifest map[string]any

// get walks a path of map keys and list indexes ("spec.ports.0.name").
func (m manifest) get(path string) any {
	var v any = map[string]any(m)
	for _, k := range strings.Split(path, ".") {
		switch c := v.(type) {
		case map[string]any:
			v = c[k]
		case []any:
			i := 0
			for _, d := range k {
				i = i*10 + int(d-'0')
			}
			if i >= len(c) {
				return nil
			}
			v = c[i]
		default:
			return nil
		}
	}
	return v
}

func (m manifest) str(path string) string { s, _ := m.get(path).(string); return s }

// render runs helm template with the --set values (or "-f FILE") and
// parses every object.
func render(t *testing.T, helm string, set ...string) map[string]manifest {
	t.Helper()
	args := []string{"template", "sluice", chart}
	for _, s := range set {
		if f, ok := strings.CutPrefix(s, "-f "); ok {
			args = append(args, "-f", f)
			continue
		}
		args = append(args, "--set", s)
	}
	out, err := exec.Command(helm, args...).CombinedOutput()
	if err != nil {
		t.Fatalf("helm %v: %v\n%s", args, err, out)
	}
	objs := map[string]manifest{}
	dec := yaml.NewDecoder(bytes.NewReader(out))
	for {
		var raw map[string]any // nested maps decode as map[string]any too
		if err := dec.Decode(&raw); err != nil {
			if errors.Is(err, io.EOF) {
				break
			}
			t.Fatalf("helm template output does not parse: %v\n%s", err, out)
		}
		if raw == nil {
			continue
		}
		m := manifest(raw)
		kind := m.str("kind")
		if kind == "" || m.str("apiVersion") == "" || m.str("metadata.name") == "" {
			t.Errorf("rendered object without kind, apiVersion or name: %v", m)
		}
		objs[kind] = m
	}
	return objs
}

// TestHelmChart lints the chart and renders it with helm, then checks the
// manifests: probes on /readyz and /healthz, a grace period longer than
// the drain and the shutdown timeout, the config from a ConfigMap that
// Sluice's own loader accepts, secrets from a Secret of real SLUICE_*
// names, HTTP and gRPC on the Service, a PodDisruptionBudget, and the
// optional ServiceMonitor.
func TestHelmChart(t *testing.T) {
	enginetest.Deploy(t)
	t.Parallel()
	helm := enginetest.GoTool(t, "helm", helmModule)
	if out, err := exec.Command(helm, "lint", "--strict", chart).CombinedOutput(); err != nil {
		t.Fatalf("helm lint: %v\n%s", err, out)
	}
	objs := render(t, helm, "secrets.SLUICE_DATABASE_URL=postgres://sluice:pw@db:5432/sluice",
		"secrets.SLUICE_REDIS_URL=redis://redis:6379/0", "secrets.SLUICE_WEBHOOK_SECRET=whsec_dGVzdA==")
	for _, kind := range []string{"Deployment", "Service", "ConfigMap", "Secret", "PodDisruptionBudget"} {
		if objs[kind] == nil {
			t.Fatalf("helm template rendered no %s", kind)
		}
	}
	if objs["ServiceMonitor"] != nil {
		t.Error("a ServiceMonitor is rendered by default; it needs the Prometheus Operator")
	}
	dep, svc, sec, pdb := objs["Deployment"], objs["Service"], objs["Secret"], objs["PodDisruptionBudget"]
	c := "spec.template.spec.containers.0."
	if p := dep.str(c + "readinessProbe.httpGet.path"); p != "/readyz" {
		t.Errorf("readiness probe path = %q; want /readyz", p)
	}
	if p := dep.str(c + "livenessProbe.httpGet.path"); p != "/healthz" {
		t.Errorf("liveness probe path = %q; want /healthz", p)
	}
	if dep.get("spec.template.spec.securityContext.runAsNonRoot") != true {
		t.Error("pods may run as root")
	}

	cfg := loadRendered(t, objs, nil)
	grace, _ := dep.get("spec.template.spec.terminationGracePeriodSeconds").(int)
	if need := cfg.DrainDelay + cfg.ShutdownTimeout; time.Duration(grace)*time.Second <= need {
		t.Errorf("terminationGracePeriodSeconds = %d; want more than drain_delay + shutdown_timeout = %v", grace, need)
	}
	if cfg.DrainDelay <= 0 {
		t.Error("drain_delay is 0: pods would close their listeners before the endpoints controller removes them")
	}
	if cfg.DatabaseURL == "" || cfg.RedisURL == "" || cfg.NATSURL == "" || cfg.NATSReplicas != 3 {
		t.Errorf("config = database %q, redis %q, nats %q x%d; want all three engines external, 3 replicas", cfg.DatabaseURL, cfg.RedisURL, cfg.NATSURL, cfg.NATSReplicas)
	}
	if dep.str(c+"envFrom.0.secretRef.name") != sec.str("metadata.name") {
		t.Errorf("the pods read secrets from %q, not the chart's Secret %q", dep.str(c+"envFrom.0.secretRef.name"), sec.str("metadata.name"))
	}

	ports := map[string]any{}
	for _, p := range dep.get(c + "ports").([]any) {
		p := p.(map[string]any)
		ports[p["name"].(string)] = p["containerPort"]
	}
	if ports["http"] == nil || !strings.HasSuffix(cfg.HTTPAddr, ":"+str(ports["http"])) || !strings.HasSuffix(cfg.GRPCAddr, ":"+str(ports["grpc"])) {
		t.Errorf("container ports %v do not match the listen addresses %s and %s", ports, cfg.HTTPAddr, cfg.GRPCAddr)
	}
	for i, name := range []string{"http", "grpc"} {
		if tp := svc.str("spec.ports." + str(i) + ".targetPort"); tp != name || ports[tp] == nil {
			t.Errorf("Service port %d targets %q; want the container's %s port", i, tp, name)
		}
	}
	if svc.str("spec.ports.1.appProtocol") != "grpc" {
		t.Error("the Service's gRPC port has no appProtocol: grpc")
	}
	podLabels := dep.get("spec.template.metadata.labels").(map[string]any)
	for k, v := range pdb.get("spec.selector.matchLabels").(map[string]any) {
		if podLabels[k] != v {
			t.Errorf("the PodDisruptionBudget selects %s=%v, which the pods do not carry", k, v)
		}
	}

	// docs/deploy.md's values-prod.yaml renders, and its configuration loads.
	doc := read(t, "docs/deploy.md")
	_, prod, ok := strings.Cut(doc, "```yaml\n# values-prod.yaml\n")
	prod, _, _ = strings.Cut(prod, "```")
	if !ok || prod == "" {
		t.Fatal("docs/deploy.md has no values-prod.yaml block")
	}
	prodFile := filepath.Join(t.TempDir(), "values-prod.yaml")
	if err := os.WriteFile(prodFile, []byte(prod), 0o600); err != nil {
		t.Fatal(err)
	}
	ca := tlstest.NewCA(t, "test CA").File
	prodCfg := loadRendered(t, render(t, helm, "-f "+prodFile), map[string]string{"SLUICE_REDIS_CA_FILE": ca})
	if prodCfg.Ratelimit.Nodes != 3 || prodCfg.NATSReplicas != 3 || prodCfg.RedisCAFile != ca || len(prodCfg.TrustedProxies) == 0 {
		t.Errorf("docs/deploy.md's values load as %+v; want 3 nodes, 3 replicas, the Redis CA and trusted proxies", prodCfg)
	}

	objs = render(t, helm, "serviceMonitor.enabled=true", "existingSecret=sluice-prod", "podDisruptionBudget.enabled=false")
	if sm := objs["ServiceMonitor"]; sm == nil || sm.str("spec.endpoints.0.path") != "/metrics" || sm.str("spec.endpoints.0.port") != "http" {
		t.Errorf("ServiceMonitor = %v; want one scraping /metrics on the http port", sm)
	}
	if objs["Secret"] != nil || objs["Deployment"].str(c+"envFrom.0.secretRef.name") != "sluice-prod" {
		t.Error("with existingSecret the chart must make no Secret and read the named one")
	}
	if objs["PodDisruptionBudget"] != nil {
		t.Error("podDisruptionBudget.enabled=false still renders one")
	}
}

func str(v any) string {
	switch v := v.(type) {
	case int:
		return strconv.Itoa(v)
	case string:
		return v
	}
	return ""
}

// loadRendered loads the rendered ConfigMap's sluice.yaml with the
// Secret's and the pod's variables (override replaces some) through
// Sluice's own configuration loader, which refuses unknown keys and bad
// values, as `sluice serve` in the pod would.
func loadRendered(t *testing.T, objs map[string]manifest, override map[string]string) config.Config {
	t.Helper()
	dep, cm, sec := objs["Deployment"], objs["ConfigMap"], objs["Secret"]
	c := "spec.template.spec.containers.0."
	cmData, _ := cm.get("data").(map[string]any)
	sluiceYAML, _ := cmData["sluice.yaml"].(string)
	file := filepath.Join(t.TempDir(), "sluice.yaml")
	if err := os.WriteFile(file, []byte(sluiceYAML), 0o600); err != nil {
		t.Fatal(err)
	}
	env := map[string]string{}
	if sec != nil {
		for k, v := range sec.get("stringData").(map[string]any) {
			env[k] = v.(string)
		}
		checkEnv(t, "the chart's Secret", env)
	}
	for _, e := range dep.get(c + "env").([]any) {
		e := e.(map[string]any)
		env[e["name"].(string)] = e["value"].(string)
	}
	checkEnv(t, "the chart's pods", env)
	if !strings.HasPrefix(env["SLUICE_CONFIG"], dep.str(c+"volumeMounts.0.mountPath")+"/") {
		t.Errorf("SLUICE_CONFIG = %q is not in the ConfigMap's mount", env["SLUICE_CONFIG"])
	}
	env["SLUICE_CONFIG"] = file
	for k, v := range override {
		env[k] = v
	}
	cfg, _, err := config.Load(flag.NewFlagSet("serve", flag.ContinueOnError), nil, func(k string) string { return env[k] })
	if err != nil {
		t.Fatalf("the chart's configuration does not load: %v\n%s", err, sluiceYAML)
	}
	return cfg
}
