package envoyrls

import (
	"errors"
	"os"
	"path/filepath"
	"testing"
)

// FuzzParse feeds arbitrary bytes to the YAML parser: it must return a
// Config or an ErrInvalidConfig, never panic or run away, and a Config
// it returns must answer lookups.
func FuzzParse(f *testing.F) {
	files, _ := filepath.Glob("testdata/*/*.y*ml")
	for _, name := range files {
		data, err := os.ReadFile(name)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(data)
	}
	f.Add([]byte(matchYAML))
	f.Add([]byte("domain: d\ndescriptors:\n  - &a {key: k}\n  - {key: j, descriptors: [*a, *a]}\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		c, err := Parse(map[string][]byte{"f.yaml": data})
		if err != nil {
			if !errors.Is(err, ErrInvalidConfig) {
				t.Fatalf("Parse = %v, not an ErrInvalidConfig", err)
			}
			return
		}
		if first, second := c.Dump(), c.Dump(); first != second {
			t.Fatal("Dump is not deterministic")
		}
		for _, d := range c.domains {
			d.match(entries("k", "v", "k", "v"))
			d.match(entries("key", "", "value", "*"))
		}
	})
}
