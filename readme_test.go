package relock_test

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/relock-go/relock/internal/redistest"
)

// docPages are the pages whose complete Go programs must compile: the
// README, and the guides it links to.
func docPages(t *testing.T) []string {
	t.Helper()
	pages, err := filepath.Glob(filepath.Join("docs", "*.md"))
	require.NoError(t, err)
	return append([]string{"README.md", "CONTRIBUTING.md"}, pages...)
}

// program is a ```go block of a page that is a complete program.
type program struct {
	page string
	line int // of the block's first line of code
	src  string
}

// programs returns the ```go blocks of the page's Markdown whose code is
// a complete program (package main). Other blocks are fragments.
func programs(page string, md []byte) []program {
	var out []program
	var block []string
	in, start := false, 0
	sc := bufio.NewScanner(bytes.NewReader(md))
	for n := 1; sc.Scan(); n++ {
		line := sc.Text()
		trimmed := strings.TrimSpace(line)
		switch {
		case !in && trimmed == "```go":
			in, start, block = true, n+1, nil
		case in && trimmed == "```":
			in = false
			src := strings.Join(block, "\n") + "\n"
			if isMain(src) {
				out = append(out, program{page: page, line: start, src: src})
			}
		case in:
			block = append(block, line)
		}
	}
	return out
}

// isMain reports whether src's package clause, after any comments, is
// "package main".
func isMain(src string) bool {
	for _, l := range strings.Split(src, "\n") {
		l = strings.TrimSpace(l)
		if l == "" || strings.HasPrefix(l, "//") {
			continue
		}
		return l == "package main"
	}
	return false
}

func TestReadmeProgramsFound(t *testing.T) {
	redistest.Parallel(t)
	md := "intro\n```go\nx := 1\n```\n```go\n// A program.\npackage main\n\nfunc main() {}\n```\n```sh\ngo test\n```\n"
	got := programs("p.md", []byte(md))
	require.Len(t, got, 1)
	require.Equal(t, 6, got[0].line)
	require.Equal(t, "// A program.\npackage main\n\nfunc main() {}\n", got[0].src)
}

// TestReadmeProgramsCompile: every complete program (package main) in a
// ```go block of the README and the docs pages compiles and passes go vet,
// built in a scratch module that requires relock, replaced by this
// checkout, with relock's own requirements (go.mod, go.sum) and the module
// cache and GOPROXY of the environment. The README must have one.
func TestReadmeProgramsCompile(t *testing.T) {
	redistest.Parallel(t)
	goTool, err := exec.LookPath("go")
	if err != nil {
		if root := os.Getenv("GOROOT"); root != "" {
			goTool = filepath.Join(root, "bin", "go")
			_, err = os.Stat(goTool)
		}
		if err != nil {
			t.Skip("no go tool on PATH or in $GOROOT/bin: the documentation's programs cannot be built")
		}
	}
	checkout, err := filepath.Abs(".")
	require.NoError(t, err)

	var progs []program
	readme := 0
	for _, page := range docPages(t) {
		md, err := os.ReadFile(page)
		if page == "CONTRIBUTING.md" && os.IsNotExist(err) {
			continue
		}
		require.NoError(t, err)
		p := programs(page, md)
		if page == "README.md" {
			readme = len(p)
		}
		progs = append(progs, p...)
	}
	require.NotZero(t, readme, "README.md has no complete Go program (a ```go block of package main)")

	dir := t.TempDir()
	mod, err := os.ReadFile("go.mod")
	require.NoError(t, err)
	first, rest, ok := strings.Cut(string(mod), "\n")
	require.True(t, ok && strings.HasPrefix(first, "module github.com/relock-go/relock"), "go.mod: %q", first)
	gomod := "module readme.example\n" + rest +
		"\nrequire github.com/relock-go/relock v0.0.0-00010101000000-000000000000\n" +
		"\nreplace github.com/relock-go/relock => " + checkout + "\n"
	require.NoError(t, os.WriteFile(filepath.Join(dir, "go.mod"), []byte(gomod), 0o644))
	sum, err := os.ReadFile("go.sum")
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(filepath.Join(dir, "go.sum"), sum, 0o644))
	for i, p := range progs {
		pkg := fmt.Sprintf("p%d", i)
		require.NoError(t, os.Mkdir(filepath.Join(dir, pkg), 0o755))
		require.NoError(t, os.WriteFile(filepath.Join(dir, pkg, "main.go"), []byte(p.src), 0o644))
	}
	// Name the page and its line in go's messages: p3/main.go:12 is line
	// 12 of the fourth program.
	pos := regexp.MustCompile(`(?:\./)?p(\d+)/main\.go:(\d+)`)
	inPages := func(out []byte) string {
		return pos.ReplaceAllStringFunc(string(out), func(m string) string {
			sub := pos.FindStringSubmatch(m)
			i, _ := strconv.Atoi(sub[1])
			n, _ := strconv.Atoi(sub[2])
			if i >= len(progs) {
				return m
			}
			return fmt.Sprintf("%s:%d", progs[i].page, progs[i].line+n-1)
		})
	}

	bin := t.TempDir() + string(os.PathSeparator)
	for _, args := range [][]string{{"build", "-o", bin, "./..."}, {"vet", "./..."}} {
		cmd := exec.Command(goTool, args...)
		cmd.Dir = dir
		cmd.Env = append(os.Environ(), "GOFLAGS=-mod=mod", "GOWORK=off")
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("go %s of the documentation's programs: %v\n%s", strings.Join(args, " "), err, inPages(out))
		}
	}
	t.Logf("%d programs built and vetted (%d from README.md)", len(progs), readme)
}
