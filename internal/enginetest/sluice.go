package enginetest

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"testing"
)

var (
	buildOnce sync.Once
	binPath   string
	buildErr  error
)

// SluiceBinary builds cmd/sluice once per test binary (without -race: the
// processes it runs are the system under test, not the test's own code)
// and returns its path, for tests that run `sluice serve` as processes of
// their own.
func SluiceBinary(t testing.TB) string {
	t.Helper()
	buildOnce.Do(func() {
		dir, err := os.MkdirTemp("", "sluice-bin-")
		if err != nil {
			buildErr = err
			return
		}
		binPath = filepath.Join(dir, "sluice")
		out, err := exec.Command("go", "build", "-o", binPath, "github.com/sluicehq/sluice/cmd/sluice").CombinedOutput()
		if err != nil {
			buildErr = fmt.Errorf("go build: %v\n%s", err, out)
		}
	})
	if buildErr != nil {
		t.Fatal(buildErr)
	}
	return binPath
}
