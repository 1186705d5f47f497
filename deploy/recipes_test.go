package deploy

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/sluicehq/sluice/internal/config"
)

// root is the repository root, seen from this package's directory.
const root = ".."

func read(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(root, path))
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// envNames is every SLUICE_* variable Sluice reads.
func envNames() map[string]bool {
	names := map[string]bool{}
	for _, f := range config.Fields() {
		names[f.Env] = true
	}
	return names
}

// checkEnv fails for each SLUICE_* name that is no setting of Sluice.
func checkEnv(t *testing.T, where string, env map[string]string) {
	t.Helper()
	known := envNames()
	for name := range env {
		if strings.HasPrefix(name, "SLUICE_") && !known[name] {
			t.Errorf("%s sets %s, which is no Sluice setting (docs/configuration.md)", where, name)
		}
	}
}

// shellWords splits a shell command line on spaces, keeping double- and
// single-quoted words whole (enough for the recipes' one-line commands).
func shellWords(s string) []string {
	var words []string
	var cur strings.Builder
	quote, in := byte(0), false
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case quote != 0 && c == quote:
			quote = 0
		case quote != 0:
			cur.WriteByte(c)
		case c == '"' || c == '\'':
			quote, in = c, true
		case c == ' ' || c == '\t':
			if in {
				words = append(words, cur.String())
				cur.Reset()
				in = false
			}
		default:
			cur.WriteByte(c)
			in = true
		}
	}
	if in {
		words = append(words, cur.String())
	}
	return words
}

func TestShellWords(t *testing.T) {
	got := strings.Join(shellWords(`A=0 go build -ldflags "-s -w -X main.version=${V}" -o 'x y'`), "|")
	if want := "A=0|go|build|-ldflags|-s -w -X main.version=${V}|-o|x y"; got != want {
		t.Errorf("shellWords = %q, want %q", got, want)
	}
}
