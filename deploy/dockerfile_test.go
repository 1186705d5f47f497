package deploy

import (
	"debug/elf"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/sluicehq/sluice/internal/enginetest"
)

// dockerfile is the Dockerfile as instructions: continuation lines joined,
// comments dropped, each line split into its keyword and the rest.
func dockerfile(t *testing.T) [][2]string {
	t.Helper()
	text := strings.ReplaceAll(read(t, "Dockerfile"), "\\\n", " ")
	var out [][2]string
	for line := range strings.SplitSeq(text, "\n") {
		line = strings.TrimSpace(line)
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		kw, rest, _ := strings.Cut(line, " ")
		out = append(out, [2]string{strings.ToUpper(kw), strings.TrimSpace(rest)})
	}
	return out
}

// dockerBuildLine returns the Dockerfile's `RUN ... go build ...` words.
func dockerBuildLine(t *testing.T) []string {
	t.Helper()
	for _, in := range dockerfile(t) {
		if in[0] == "RUN" && strings.Contains(in[1], "go build") {
			return shellWords(in[1])
		}
	}
	t.Fatal("the Dockerfile has no RUN ... go build line")
	return nil
}

// TestDockerfileShape: a golang:1.26 build stage, a distroless static
// final stage run as a non-root user, data in a volume, `sluice
// healthcheck` as the health check, and only real SLUICE_* variables.
func TestDockerfileShape(t *testing.T) {
	t.Parallel()
	var froms []string
	env := map[string]string{}
	var user, health, entry string
	for _, in := range dockerfile(t) {
		switch in[0] {
		case "FROM":
			froms = append(froms, strings.Fields(in[1])[0])
		case "ENV":
			for _, w := range shellWords(in[1]) {
				if k, v, ok := strings.Cut(w, "="); ok {
					env[k] = v
				}
			}
		case "USER":
			user = in[1]
		case "HEALTHCHECK":
			health = in[1]
		case "ENTRYPOINT":
			entry = in[1]
		}
	}
	goMod := read(t, "go.mod")
	goVersion := regexp.MustCompile(`(?m)^go (\d+\.\d+)`).FindStringSubmatch(goMod)
	if len(froms) != 2 || goVersion == nil || froms[0] != "golang:"+goVersion[1] {
		t.Errorf("stages = %v; want golang:%v (go.mod's Go) then the final image", froms, goVersion)
	}
	if len(froms) == 2 && !strings.HasPrefix(froms[1], "gcr.io/distroless/static") && froms[1] != "scratch" {
		t.Errorf("final stage = %s; want distroless static or scratch", froms[1])
	}
	if user == "" || strings.HasPrefix(user, "0") || strings.HasPrefix(user, "root") {
		t.Errorf("USER = %q; want a non-root user", user)
	}
	if !strings.Contains(health, `"healthcheck"`) || !strings.Contains(health, "/usr/local/bin/sluice") {
		t.Errorf("HEALTHCHECK = %q; want sluice healthcheck (distroless has no curl)", health)
	}
	if !strings.Contains(entry, "/usr/local/bin/sluice") {
		t.Errorf("ENTRYPOINT = %q; want the sluice binary", entry)
	}
	checkEnv(t, "the Dockerfile", env)
	if env["SLUICE_HTTP_ADDR"] != "0.0.0.0:8080" || env["SLUICE_GRPC_ADDR"] != "0.0.0.0:8081" {
		t.Errorf("ENV addresses = %q, %q; want every address on the EXPOSEd 8080 and 8081", env["SLUICE_HTTP_ADDR"], env["SLUICE_GRPC_ADDR"])
	}
}

// TestDockerfileBuildLine runs the Dockerfile's own go build line (with
// VERSION set, the output in a temp dir) as `docker build` would, and
// checks the binary: static, reporting that version and, from a git
// clone, the checkout's revision.
func TestDockerfileBuildLine(t *testing.T) {
	enginetest.Deploy(t)
	t.Parallel()
	words := dockerBuildLine(t)
	const version = "v0.0.0-dockerfile"
	bin := filepath.Join(t.TempDir(), "sluice")
	var env, args []string
	for i := 0; i < len(words); i++ {
		w := strings.ReplaceAll(words[i], "${VERSION}", version)
		switch {
		case len(args) == 0 && strings.Contains(w, "="):
			env = append(env, w)
		case w == "-o" && i+1 < len(words):
			args = append(args, "-o", bin)
			i++
		default:
			args = append(args, w)
		}
	}
	if len(args) < 2 || args[0] != "go" || args[1] != "build" || !contains(env, "CGO_ENABLED=0") {
		t.Fatalf("Dockerfile build line = %q; want CGO_ENABLED=0 go build ...", words)
	}
	cmd := exec.Command(args[0], args[1:]...)
	cmd.Dir = root
	// As in the golang image: no go env file turning VCS stamping off.
	cmd.Env = append(append(os.Environ(), env...), "GOFLAGS=-buildvcs=auto")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("%s: %v\n%s", strings.Join(words, " "), err, out)
	}

	f, err := elf.Open(bin)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	for _, p := range f.Progs {
		if p.Type == elf.PT_INTERP {
			t.Error("the image's binary has a dynamic loader (PT_INTERP): not static, it would not run on distroless static")
		}
	}
	if libs, _ := f.ImportedLibraries(); len(libs) > 0 {
		t.Errorf("the image's binary needs %v; want none", libs)
	}

	out, err := exec.Command(bin, "version").CombinedOutput()
	if err != nil || !strings.HasPrefix(string(out), "sluice "+version+"\n") {
		t.Fatalf("sluice version = %q, %v; want %s from -X main.version", out, err, version)
	}
	if fi, err := os.Stat(filepath.Join(root, ".git")); err == nil && fi.IsDir() {
		head, err := exec.Command("git", "-C", root, "rev-parse", "HEAD").Output()
		if err != nil {
			t.Fatalf("git rev-parse HEAD: %v", err)
		}
		if want := "revision: " + strings.TrimSpace(string(head)); !strings.Contains(string(out), want) {
			t.Errorf("sluice version = %q; want %q from the build info", out, want)
		}
	} else {
		t.Logf("not a git clone with a .git directory (a worktree?): the revision is not stamped; sluice version = %q", out)
	}
}

// TestReleaseFlagsAgree: `make release`, GoReleaser and the Dockerfile
// build with the same flags.
func TestReleaseFlagsAgree(t *testing.T) {
	t.Parallel()
	norm := func(s string) string {
		return regexp.MustCompile(`main\.version=\S+?(["\s]|$)`).ReplaceAllString(s, "main.version=V$1")
	}
	docker := norm(strings.Join(dockerBuildLine(t), " "))
	make := read(t, "Makefile")
	m := regexp.MustCompile(`(?m)^RELEASE_FLAGS := (.*)$`).FindStringSubmatch(make)
	if m == nil {
		t.Fatal("the Makefile has no RELEASE_FLAGS")
	}
	makeFlags := norm(strings.Join(shellWords(m[1]), " "))
	if !strings.Contains(docker, makeFlags) {
		t.Errorf("Dockerfile build %q lacks make release's flags %q", docker, makeFlags)
	}
	gr := read(t, ".goreleaser.yaml")
	for _, want := range []string{"CGO_ENABLED=0", "- -trimpath", "-s -w -X main.version={{ .Version }}"} {
		if !strings.Contains(gr, want) {
			t.Errorf(".goreleaser.yaml lacks %q (the Dockerfile builds with %q)", want, docker)
		}
	}
	if !strings.Contains(docker, "CGO_ENABLED=0") || !strings.Contains(make, "CGO_ENABLED=0") {
		t.Error("the Dockerfile and make release must both build with CGO_ENABLED=0")
	}
}

func contains(list []string, s string) bool {
	for _, v := range list {
		if v == s {
			return true
		}
	}
	return false
}
