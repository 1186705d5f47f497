package main

import (
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"unicode"
)

// outsideRef is what a reader of the repository cannot follow: the
// shared folder beside it, the product contract kept there, and an
// issue tracker's numbers.
var outsideRef = regexp.MustCompile(`(?i)\.\./shared|\bSPEC\.md\b|\bissues?\s+#?\d+`)

// TestDocsSelfContained keeps the README, docs/ and the Go sources
// (comments included) standing on their own: none of them points at the
// folder beside the repository, at the contract file kept there, or at
// "issue <number>".
func TestDocsSelfContained(t *testing.T) {
	t.Parallel()
	checked := 0
	err := filepath.WalkDir("../..", func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if name := d.Name(); path != "../.." && (strings.HasPrefix(name, ".") || name == "node_modules") {
				return filepath.SkipDir
			}
			return nil
		}
		if ext := filepath.Ext(path); ext != ".md" && ext != ".go" {
			return nil
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		checked++
		for i, line := range strings.Split(string(b), "\n") {
			if m := outsideRef.FindString(line); m != "" {
				t.Errorf("%s:%d mentions %q, which a reader of the repository cannot follow; say it here instead", path, i+1, m)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if checked < 100 {
		t.Fatalf("checked %d files; the walk looks wrong", checked)
	}
}

// mdLink is a Markdown link's target: ](path), ](path#anchor), ](#anchor).
var mdLink = regexp.MustCompile(`\]\(([^)\s]+)\)`)

// TestDocsLinks checks every relative link of README.md and docs/*.md:
// the file it names exists and, with an anchor, holds a heading of that
// name (as GitHub makes anchors from headings).
func TestDocsLinks(t *testing.T) {
	t.Parallel()
	files, err := filepath.Glob("../../docs/*.md")
	if err != nil {
		t.Fatal(err)
	}
	files = append(files, "../../README.md")
	anchors := map[string]map[string]bool{} // by cleaned path
	anchorsOf := func(path string) map[string]bool {
		if a, ok := anchors[path]; ok {
			return a
		}
		b, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		anchors[path] = headingAnchors(string(b))
		return anchors[path]
	}
	links := 0
	for _, file := range files {
		b, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		for i, line := range outsideFences(string(b)) {
			for _, m := range mdLink.FindAllStringSubmatch(line, -1) {
				target := m[1]
				if strings.Contains(target, "://") || strings.HasPrefix(target, "mailto:") {
					continue
				}
				links++
				path, anchor, _ := strings.Cut(target, "#")
				path = filepath.Clean(filepath.Join(filepath.Dir(file), path))
				if target[0] == '#' {
					path = filepath.Clean(file)
				}
				if _, err := os.Stat(path); err != nil {
					t.Errorf("%s:%d links %s: no such file", file, i+1, target)
					continue
				}
				if anchor != "" && (!strings.HasSuffix(path, ".md") || !anchorsOf(path)[anchor]) {
					t.Errorf("%s:%d links %s: %s has no heading with that anchor", file, i+1, target, path)
				}
			}
		}
	}
	if links < 50 {
		t.Fatalf("found %d relative links; the pattern looks wrong", links)
	}
}

// outsideFences returns doc's lines with those inside ``` blocks blanked,
// so numbering stays that of the file.
func outsideFences(doc string) []string {
	lines := strings.Split(doc, "\n")
	in := false
	for i, l := range lines {
		if strings.HasPrefix(strings.TrimSpace(l), "```") {
			in = !in
			lines[i] = ""
		} else if in {
			lines[i] = ""
		}
	}
	return lines
}

// headingAnchors returns the anchors GitHub gives doc's headings: lower
// case, punctuation dropped, spaces to hyphens, "-1", "-2"... on repeats.
func headingAnchors(doc string) map[string]bool {
	out := map[string]bool{}
	seen := map[string]int{}
	for _, l := range outsideFences(doc) {
		text, ok := strings.CutPrefix(l, "#")
		if !ok {
			continue
		}
		text = strings.TrimLeft(text, "#")
		if !strings.HasPrefix(text, " ") {
			continue
		}
		var b strings.Builder
		for _, r := range strings.ToLower(strings.TrimSpace(text)) {
			switch {
			case r == ' ':
				b.WriteRune('-')
			case r == '-' || r == '_' || unicode.IsLetter(r) || unicode.IsDigit(r):
				b.WriteRune(r)
			}
		}
		a := b.String()
		if n := seen[a]; n > 0 {
			out[a+"-"+strconv.Itoa(n)] = true
		} else {
			out[a] = true
		}
		seen[a]++
	}
	return out
}
