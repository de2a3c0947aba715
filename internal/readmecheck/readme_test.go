package readmecheck

import (
	"bufio"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

const root = "../.."

var marker = regexp.MustCompile(`^<!-- example: (\S+) -->$`)

// block is a README code block that claims to be a file.
type block struct {
	path string
	line int // of the marker, for messages
	code string
}

// examples are the marked code blocks of the README: each marker is
// followed, after blank lines only, by a fenced block.
func examples(t *testing.T, readme string) []block {
	t.Helper()
	var out []block
	lines := strings.Split(readme, "\n")
	for i := 0; i < len(lines); i++ {
		m := marker.FindStringSubmatch(strings.TrimSpace(lines[i]))
		if m == nil {
			continue
		}
		b := block{path: m[1], line: i + 1}
		j := i + 1
		for j < len(lines) && strings.TrimSpace(lines[j]) == "" {
			j++
		}
		if j == len(lines) || !strings.HasPrefix(lines[j], "```") {
			t.Errorf("README.md:%d: the marker for %s is not followed by a code block", b.line, b.path)
			continue
		}
		fence := lines[j][:strings.LastIndex(lines[j], "`")+1]
		var code []string
		k := j + 1
		for ; k < len(lines) && lines[k] != fence; k++ {
			code = append(code, lines[k])
		}
		if k == len(lines) {
			t.Errorf("README.md:%d: the code block for %s is not closed", b.line, b.path)
			continue
		}
		b.code = strings.Join(code, "\n") + "\n"
		out = append(out, b)
		i = k
	}
	return out
}

// TestQuickStartsAreTheExamples fails when a README code block and the
// example file it names differ, so the README never shows code that the
// demo does not run.
func TestQuickStartsAreTheExamples(t *testing.T) {
	data, err := os.ReadFile(filepath.Join(root, "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	blocks := examples(t, string(data))
	demo := demoText(t)
	seen := map[string]bool{}
	for _, b := range blocks {
		seen[b.path] = true
		file, err := os.ReadFile(filepath.Join(root, b.path))
		if err != nil {
			t.Errorf("README.md:%d: %v", b.line, err)
			continue
		}
		if got, want := b.code, string(file); got != want {
			t.Errorf("README.md:%d: the code block differs from %s at its line %d:\n  README: %q\n  file:   %q\n(copy the file into the README, or the README's change into the file)",
				b.line, b.path, firstDifference(got, want), lineAt(got, firstDifference(got, want)), lineAt(want, firstDifference(got, want)))
		}
		if !strings.Contains(demo, b.path) && !strings.Contains(demo, "./"+filepath.Dir(b.path)) {
			t.Errorf("README.md:%d: %s is not run by make demo", b.line, b.path)
		}
	}
	// The four Quick Starts.
	for _, lang := range []string{"python", "node", "go", "c"} {
		found := false
		for p := range seen {
			if strings.HasPrefix(p, "examples/"+lang+"/") {
				found = true
			}
		}
		if !found {
			t.Errorf("README.md has no Quick Start block marked with a file under examples/%s/", lang)
		}
	}
}

// demoText is the recipe of the Makefile's demo target and the text of
// the scripts it runs.
func demoText(t *testing.T) string {
	t.Helper()
	f, err := os.Open(filepath.Join(root, "Makefile"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var recipe strings.Builder
	in := false
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := sc.Text()
		switch {
		case strings.HasPrefix(line, "demo:"):
			in = true
		case in && strings.HasPrefix(line, "\t"):
			recipe.WriteString(line + "\n")
		case in:
			in = false
		}
	}
	text := recipe.String()
	for _, word := range strings.Fields(text) {
		if strings.HasSuffix(word, ".sh") {
			if script, err := os.ReadFile(filepath.Join(root, word)); err == nil {
				text += string(script)
			}
		}
	}
	if recipe.Len() == 0 {
		t.Fatal("the Makefile has no demo target")
	}
	return text
}

func firstDifference(a, b string) int {
	la, lb := strings.Split(a, "\n"), strings.Split(b, "\n")
	for i := 0; i < len(la) && i < len(lb); i++ {
		if la[i] != lb[i] {
			return i + 1
		}
	}
	return min(len(la), len(lb)) + 1
}

func lineAt(s string, n int) string {
	lines := strings.Split(s, "\n")
	if n-1 < len(lines) {
		return lines[n-1]
	}
	return "(end of text)"
}
