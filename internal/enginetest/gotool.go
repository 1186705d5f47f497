package enginetest

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
)

var goToolMu sync.Mutex

// GoTool returns the path of the program name: from PATH, or built with
// `go install module` (module@version) into a GOBIN under the temp dir,
// one per module version, so later runs reuse it. When the install fails
// the test is skipped, or failed with CI=true.
func GoTool(t testing.TB, name, module string) string {
	t.Helper()
	if path, err := exec.LookPath(name); err == nil {
		return path
	}
	goToolMu.Lock()
	defer goToolMu.Unlock()
	bin := filepath.Join(os.TempDir(), "sluice-test-tools", strings.NewReplacer("/", "_", "@", "_").Replace(module))
	path := filepath.Join(bin, name)
	if _, err := os.Stat(path); err == nil {
		return path
	}
	cmd := exec.Command("go", "install", module)
	cmd.Env = append(os.Environ(), "GOBIN="+bin)
	cmd.Dir = os.TempDir() // outside this module: the tool's own go.mod decides
	if out, err := cmd.CombinedOutput(); err != nil {
		missing(t, "go install "+module+": "+err.Error()+"\n"+string(out))
	}
	return path
}
