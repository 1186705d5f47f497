package main

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice/client"
)

// TestClientAdminCalls drives the template, dead letter, policy and block
// calls of package client against a node, through the OpenAPI validator.
func TestClientAdminCalls(t *testing.T) {
	t.Parallel()
	n := startNode(t, testConfig(t))
	ctx := context.Background()
	c := testClient(n.httpURL, "")

	ts, err := c.Templates(ctx)
	if err != nil || len(ts) == 0 || !slices.ContainsFunc(ts, func(s client.TemplateSummary) bool { return s.Type == "otp" && s.Default }) {
		t.Fatalf("Templates = %+v, %v; want the shipped otp, default", ts, err)
	}
	put, err := c.PutTemplate(ctx, client.Template{Type: "invoice.ready", Category: "orders",
		Channels: map[string]map[string]client.Content{"default": {"en": {Subject: "Invoice {n}", Body: "Pay {n}"}}}})
	if err != nil || put.Type != "invoice.ready" || put.Default || put.UpdatedAt.IsZero() {
		t.Fatalf("PutTemplate = %+v, %v", put, err)
	}
	if got, err := c.Template(ctx, "invoice.ready"); err != nil || got.Channels["default"]["en"].Subject != "Invoice {n}" {
		t.Errorf("Template = %+v, %v", got, err)
	}
	if err := c.DeleteTemplate(ctx, "invoice.ready"); err != nil {
		t.Errorf("DeleteTemplate: %v", err)
	}
	if err := c.DeleteTemplate(ctx, "invoice.ready"); !client.IsStatus(err, 404) {
		t.Errorf("DeleteTemplate again = %v, want a 404 *Error", err)
	}

	if p, err := c.DeadLetters(ctx, "", 10); err != nil || p.Items == nil || p.NextCursor != "" {
		t.Errorf("DeadLetters = %+v, %v; want an empty page", p, err)
	}
	if _, err := c.ReplayDeadLetter(ctx, "dl_nope"); !client.IsStatus(err, 404) {
		t.Errorf("ReplayDeadLetter(unknown) = %v, want 404", err)
	}

	p, err := c.PutPolicy(ctx, client.Policy{Name: "cli-test", Algorithm: "gcra", Limit: 10, Period: "1m", Description: "from the test"})
	if err != nil || p.Source != "database" || p.Limit != 10 {
		t.Fatalf("PutPolicy = %+v, %v", p, err)
	}
	if got, err := c.GetPolicy(ctx, "cli-test"); err != nil || got.Description != "from the test" {
		t.Errorf("GetPolicy = %+v, %v", got, err)
	}

	b, err := c.Block(ctx, client.BlockRequest{Key: "api_key:bad", Policy: "cli-test", Duration: 15 * time.Minute, Reason: "abuse"})
	if err != nil || b.Key != "api_key:bad" || b.Policy != "cli-test" || b.ExpiresAt.Sub(b.CreatedAt) != 15*time.Minute {
		t.Fatalf("Block = %+v, %v", b, err)
	}
	if _, err := c.Block(ctx, client.BlockRequest{Key: "api_key:bad", Duration: time.Minute, Reason: "every policy"}); err != nil {
		t.Fatal(err)
	}
	other := "other"
	if err := c.DeleteBlock(ctx, client.UnblockRequest{Key: "api_key:bad", Policy: &other}); !client.IsStatus(err, 404) {
		t.Errorf("DeleteBlock of a policy with no block = %v, want 404", err)
	}
	only := "cli-test"
	if err := c.DeleteBlock(ctx, client.UnblockRequest{Key: "api_key:bad", Policy: &only}); err != nil {
		t.Errorf("DeleteBlock(policy cli-test): %v", err)
	}
	if bs, err := c.Blocks(ctx); err != nil || len(bs) != 1 || bs[0].Policy != "" {
		t.Errorf("Blocks after lifting one = %+v, %v; want the block of every policy left", bs, err)
	}
	if err := c.DeleteBlock(ctx, client.UnblockRequest{Key: "api_key:bad"}); err != nil {
		t.Errorf("DeleteBlock(every): %v", err)
	}
	if err := c.DeletePolicy(ctx, "cli-test"); err != nil {
		t.Errorf("DeletePolicy: %v", err)
	}
}

// jsonDoc parses out as exactly one JSON document.
func jsonDoc(t *testing.T, name, out string, v any) {
	t.Helper()
	dec := json.NewDecoder(strings.NewReader(out))
	if err := dec.Decode(v); err != nil {
		t.Fatalf("%s --json printed %q: %v", name, out, err)
	}
	if dec.More() {
		t.Errorf("%s --json printed more than one document: %q", name, out)
	}
}

// TestAdminCLI runs the templates, policies, blocks, links and dead letter
// commands against a node: a table by default, the API's answer with --json.
func TestAdminCLI(t *testing.T) {
	t.Parallel()
	_, env := startCLINode(t)
	dir := t.TempDir()
	cli := func(args ...string) string {
		t.Helper()
		code, out, errs := runCLI(t, env, args...)
		if code != 0 {
			t.Fatalf("sluice %s = %d %q %q", strings.Join(args, " "), code, out, errs)
		}
		return out
	}

	// Templates: list, get, put from what get --json printed, reset.
	if out := cli("templates", "list"); !strings.Contains(out, "TYPE") || !regexpLine(out, `^otp\s+critical\s+true\s`) {
		t.Errorf("templates list = %q, want a table with otp, critical, default", out)
	}
	var items struct {
		Items []client.TemplateSummary `json:"items"`
	}
	jsonDoc(t, "templates list", cli("templates", "list", "--json"), &items)
	if len(items.Items) < 13 {
		t.Errorf("templates list --json = %+v, want every shipped type", items)
	}
	raw := cli("templates", "get", "otp", "--json")
	var otp client.Template
	jsonDoc(t, "templates get", raw, &otp)
	if !otp.Default || otp.Type != "otp" {
		t.Fatalf("templates get otp --json = %q", raw)
	}
	file := filepath.Join(dir, "otp.json")
	if err := os.WriteFile(file, []byte(strings.Replace(raw, "Never share it.", "Keep it secret.", 1)), 0o600); err != nil {
		t.Fatal(err)
	}
	if out := cli("templates", "put", "otp", "--file", file); !strings.Contains(out, "otp (critical, custom)") || !strings.Contains(out, "Keep it secret.") {
		t.Errorf("templates put = %q", out)
	}
	if out := cli("templates", "get", "otp"); !strings.Contains(out, "Keep it secret.") || !regexpLine(out, `^sms\s+en\s`) {
		t.Errorf("templates get = %q, want the new text, a row per channel and locale", out)
	}
	if code, _, errs := runCLI(t, env, "templates", "put", "order.shipped", "--file", file); code != exitError || !strings.Contains(errs, `"otp", not "order.shipped"`) {
		t.Errorf("templates put of another type's file = %d %q", code, errs)
	}
	if out := cli("templates", "delete", "otp"); !strings.Contains(out, "deleted the stored template of otp") {
		t.Errorf("templates delete = %q", out)
	}
	var del map[string]string
	if code, out, errs := runCLI(t, env, "templates", "delete", "otp", "--json"); code != exitRefused || out != "" || !strings.Contains(errs, "404") {
		t.Errorf("templates delete of a shipped type with no override = %d %q %q, want 1 and the 404", code, out, errs)
	}
	if out := cli("templates", "get", "otp", "--json"); !strings.Contains(out, `"default": true`) {
		t.Errorf("otp after reset = %q, want the shipped template", out)
	}

	// Policies: put with flags, get, list, delete.
	if out := cli("policies", "put", "cli", "--algorithm", "token_bucket", "--limit", "5", "--period", "1m", "--description", "cli"); !regexpLine(out, `^limit\s+5$`) {
		t.Errorf("policies put = %q", out)
	}
	var pol client.Policy
	jsonDoc(t, "policies get", cli("policies", "get", "cli", "--json"), &pol)
	if pol.Name != "cli" || pol.Source != "database" || pol.Period != "1m0s" && pol.Period != "1m" {
		t.Errorf("policies get --json = %+v", pol)
	}
	if out := cli("policies", "list"); !regexpLine(out, `^cli\s+token_bucket\s+5\s`) || !regexpLine(out, `^free\s`) {
		t.Errorf("policies list = %q", out)
	}
	jsonDoc(t, "policies delete", cli("policies", "delete", "cli", "--json"), &del)
	if del["deleted"] != "cli" {
		t.Errorf("policies delete --json = %v", del)
	}

	// Blocks: add, list, check refused, delete.
	var blk client.Block
	jsonDoc(t, "blocks add", cli("blocks", "add", "api_key:cli", "--duration", "10m", "--policy", "free", "--reason", "test", "--json"), &blk)
	if blk.Key != "api_key:cli" || blk.Policy != "free" || blk.Reason != "test" {
		t.Errorf("blocks add --json = %+v", blk)
	}
	if out := cli("blocks", "list"); !regexpLine(out, `^api_key:cli\s+free\s+-\s+\S+\s+\S+\s+test$`) {
		t.Errorf("blocks list = %q", out)
	}
	if code, out, _ := runCLI(t, env, "check", "--policy", "free", "api_key:cli"); code != exitRefused || !strings.HasPrefix(out, "refused") {
		t.Errorf("check of a blocked key = %d %q, want 1 and refused", code, out)
	}
	var decision client.CheckResult
	code, out, _ := runCLI(t, env, "check", "--policy", "free", "api_key:cli", "--json")
	jsonDoc(t, "check", out, &decision)
	if code != exitRefused || decision.Allowed {
		t.Errorf("check --json of a blocked key = %d %q", code, out)
	}
	if out := cli("blocks", "delete", "api_key:cli", "--policy", "free"); !strings.Contains(out, "lifted") {
		t.Errorf("blocks delete = %q", out)
	}
	if out := cli("blocks", "list", "--json"); !strings.Contains(out, `"items": []`) {
		t.Errorf("blocks list --json after delete = %q", out)
	}

	// Links: list with a cursor, get, delete.
	for _, slug := range []string{"aa1", "aa2", "aa3"} {
		cli("shorten", "https://example.com/"+slug, "--slug", slug)
	}
	var page client.LinkPage
	jsonDoc(t, "links list", cli("links", "list", "--limit", "2", "--json"), &page)
	if len(page.Items) != 2 || page.Items[0].Code != "aa3" || page.NextCursor == "" {
		t.Fatalf("links list --limit 2 --json = %+v", page)
	}
	code, out, errs := runCLI(t, env, "links", "list", "--limit", "2", "--cursor", page.NextCursor)
	if code != 0 || !regexpLine(out, `^aa1\s+-\s+http`) || strings.Contains(out, "aa3") || strings.Contains(errs, "--cursor") {
		t.Errorf("links list --cursor = %d %q %q, want a1 only and no next page", code, out, errs)
	}
	if _, _, errs := runCLI(t, env, "links", "list", "--limit", "1"); !strings.Contains(errs, "more: --cursor ") {
		t.Errorf("links list --limit 1 stderr = %q, want how to get the next page", errs)
	}
	if out := cli("links", "get", "aa2"); !regexpLine(out, `^url\s+https://example.com/aa2$`) {
		t.Errorf("links get = %q", out)
	}
	if out := cli("links", "delete", "aa2"); strings.TrimSpace(out) != "deleted aa2" {
		t.Errorf("links delete = %q", out)
	}
	if code, _, errs := runCLI(t, env, "links", "get", "aa2"); code != exitRefused || !strings.Contains(errs, "404") {
		t.Errorf("links get after delete = %d %q", code, errs)
	}

	// Dead letters: none on a new node.
	if out := cli("dead-letters", "list"); !strings.HasPrefix(out, "ID") {
		t.Errorf("dead-letters list = %q, want the table's header", out)
	}
	var dls client.DeadLetterPage
	jsonDoc(t, "dead-letters list", cli("dead-letters", "list", "--json"), &dls)
}

// regexpLine reports whether a line of out matches re.
func regexpLine(out, re string) bool {
	return regexp.MustCompile("(?m)" + re).MatchString(out)
}

// TestVersionFlag: `sluice --version` prints what `sluice version` prints.
func TestVersionFlag(t *testing.T) {
	t.Parallel()
	code, want, _ := runCLI(t, nil, "version")
	for _, flag := range []string{"--version", "-version"} {
		if code2, got, errs := runCLI(t, nil, flag); code != 0 || code2 != 0 || got != want || !strings.HasPrefix(got, "sluice ") {
			t.Errorf("sluice %s = %d %q %q, want %q as sluice version prints", flag, code2, got, errs, want)
		}
	}
}

// TestEveryClientCommandTakesJSON: every command that talks to a server
// through package client (it has --server and --api-key) takes --json.
func TestEveryClientCommandTakesJSON(t *testing.T) {
	t.Parallel()
	clients := 0
	for _, c := range commandTable(context.Background()) {
		check := func(name string, flags []string) {
			if !slices.Contains(flags, "--server") || !slices.Contains(flags, "--api-key") || name == "bench" {
				return
			}
			clients++
			if !slices.Contains(flags, "--json") {
				t.Errorf("sluice %s talks to a server but has no --json (flags %v)", name, flags)
			}
		}
		check(c.name, c.flags)
		for _, s := range c.subs {
			check(c.name+" "+s.name, s.flags)
		}
	}
	if clients < 40 {
		t.Errorf("found %d client commands; is the command table read right?", clients)
	}
}

// TestCompletion: the bash script completes every command, subcommand and
// flag of the command table (run in bash); the zsh and fish scripts name
// every one.
func TestCompletion(t *testing.T) {
	t.Parallel()
	table := commandTable(context.Background())
	scripts := map[string]string{}
	for _, sh := range []string{"bash", "zsh", "fish"} {
		code, out, errs := runCLI(t, nil, "completion", sh)
		if code != 0 || out == "" {
			t.Fatalf("sluice completion %s = %d %q", sh, code, errs)
		}
		scripts[sh] = out
	}
	for _, c := range table {
		if c.name == "serve" || c.name == "keys" || c.name == "migrate" || c.name == "healthcheck" {
			continue // hundreds of serve flags: checked in bash below
		}
		for _, sh := range []string{"zsh", "fish"} {
			if !strings.Contains(scripts[sh], c.name) {
				t.Errorf("the %s script does not name %s", sh, c.name)
			}
			for _, s := range c.subs {
				for _, f := range s.flags {
					if !strings.Contains(scripts[sh], strings.TrimPrefix(f, "--")) {
						t.Errorf("the %s script does not name %s %s %s", sh, c.name, s.name, f)
					}
				}
			}
		}
	}
	bash, err := exec.LookPath("bash")
	if err != nil {
		t.Skip("no bash to run the bash script in")
	}
	script := filepath.Join(t.TempDir(), "sluice.bash")
	if err := os.WriteFile(script, []byte(scripts["bash"]), 0o600); err != nil {
		t.Fatal(err)
	}
	// complete prints the completions of a command line ending in cur.
	var probe strings.Builder
	probe.WriteString("source " + script + "\ncomplete_line() { COMP_WORDS=(\"$@\"); COMP_CWORD=$(( $# - 1 )); _sluice; echo \"${COMPREPLY[*]}\"; }\n")
	type want struct{ line, has string }
	var wants []want
	add := func(has string, words ...string) {
		quoted := make([]string, len(words))
		for i, w := range words {
			quoted[i] = "'" + w + "'"
		}
		probe.WriteString("complete_line " + strings.Join(quoted, " ") + "\n")
		wants = append(wants, want{strings.Join(words, " "), has})
	}
	for _, c := range table {
		add(c.name, "sluice", "")
		if c.subs == nil {
			for _, f := range c.flags {
				add(f, "sluice", c.name, f)
			}
		}
		for _, s := range c.subs {
			add(s.name, "sluice", c.name, "")
			for _, f := range s.flags {
				add(f, "sluice", c.name, s.name, f)
			}
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	out, err := exec.CommandContext(ctx, bash, "--norc", "-c", probe.String()).CombinedOutput()
	if err != nil {
		t.Fatalf("bash: %v\n%s", err, out)
	}
	lines := strings.Split(strings.TrimSuffix(string(out), "\n"), "\n")
	if len(lines) != len(wants) {
		t.Fatalf("bash printed %d lines for %d probes: %s", len(lines), len(wants), out)
	}
	for i, w := range wants {
		if !slices.Contains(strings.Fields(lines[i]), w.has) {
			t.Errorf("bash completes %q as %q, want %s among them", w.line, lines[i], w.has)
		}
	}
}
