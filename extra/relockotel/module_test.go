package relockotel_test

import (
	"archive/zip"
	"bytes"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestUserModuleResolves builds, as a user's module would, a program that
// requires relock and relockotel by version with no replace directive:
// both modules are served at v0.1.0, made from this checkout, by a module
// proxy in a directory (GOPROXY=file://), the way the real proxy serves
// the tags v0.1.0 and extra/relockotel/v0.1.0. It fails if relockotel's
// go.mod needs its replace (a pseudo-version of relock, a path the proxy
// lacks) or if relock's module zip would lack what relockotel uses.
func TestUserModuleResolves(t *testing.T) {
	if testing.Short() {
		t.Skip("builds a module from a proxy of its own")
	}
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	proxy := t.TempDir()
	serve(t, proxy, "github.com/relock-go/relock", root)
	serve(t, proxy, "github.com/relock-go/relock/extra/relockotel", filepath.Join(root, "extra", "relockotel"))

	user := t.TempDir()
	write(t, filepath.Join(user, "go.mod"), `module example.com/user

go 1.26.0

require (
	github.com/relock-go/relock v0.1.0
	github.com/relock-go/relock/extra/relockotel v0.1.0
)
`)
	write(t, filepath.Join(user, "main.go"), `package main

import (
	"context"

	"github.com/redis/go-redis/v9"
	"go.opentelemetry.io/otel/metric/noop"

	"github.com/relock-go/relock"
	"github.com/relock-go/relock/extra/relockotel"
	"github.com/relock-go/relock/mutex"
)

func main() {
	c := relock.New(redis.NewClient(&redis.Options{}), relockotel.WithMetrics(noop.NewMeterProvider()))
	defer c.Close()
	_ = mutex.New(c, "job").TryLock
	_ = context.Background()
}
`)
	// The other modules' checksums, as relockotel has them; relock's own
	// are not in any checksum database (they are made here).
	sums, err := os.ReadFile("go.sum")
	if err != nil {
		t.Fatal(err)
	}
	write(t, filepath.Join(user, "go.sum"), string(sums))
	// A module cache of its own (a version v0.1.0 cached before, say by
	// an earlier run, would be used instead of the proxy's), filled from
	// the proxy, then from this machine's module cache, then from the
	// usual proxy.
	cache := filepath.Join(goEnv(t, "GOMODCACHE"), "cache", "download")
	env := append(os.Environ(),
		"GOMODCACHE="+t.TempDir(),
		"GOPROXY=file://"+filepath.ToSlash(proxy)+",file://"+filepath.ToSlash(cache)+","+goEnv(t, "GOPROXY"),
		"GONOSUMDB=github.com/relock-go", "GOFLAGS=-mod=mod -modcacherw", "GOWORK=off")
	for _, args := range [][]string{{"get", "github.com/relock-go/relock/extra/relockotel@v0.1.0"}, {"build", "-trimpath", "-o", os.DevNull, "."}} {
		cmd := exec.Command("go", args...)
		cmd.Dir, cmd.Env = user, env
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("go %s in a user's module: %v\n%s", strings.Join(args, " "), err, out)
		}
	}
	got, err := os.ReadFile(filepath.Join(user, "go.mod"))
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"github.com/relock-go/relock v0.1.0", "github.com/relock-go/relock/extra/relockotel v0.1.0"} {
		if !strings.Contains(string(got), want) {
			t.Errorf("the user's go.mod after go get lacks %q:\n%s", want, got)
		}
	}
}

// serve adds module path at v0.1.0, the files of dir as the go command
// would zip them (no nested module, no .git), to the proxy directory.
func serve(t *testing.T, proxy, path, dir string) {
	t.Helper()
	at := filepath.Join(proxy, filepath.FromSlash(path), "@v")
	if err := os.MkdirAll(at, 0o755); err != nil {
		t.Fatal(err)
	}
	mod, err := os.ReadFile(filepath.Join(dir, "go.mod"))
	if err != nil {
		t.Fatal(err)
	}
	write(t, filepath.Join(at, "list"), "v0.1.0\n")
	write(t, filepath.Join(at, "v0.1.0.info"), `{"Version":"v0.1.0","Time":"2026-12-01T00:00:00Z"}`)
	write(t, filepath.Join(at, "v0.1.0.mod"), string(mod))

	var buf bytes.Buffer
	z := zip.NewWriter(&buf)
	err = filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		if d.IsDir() {
			if rel != "." && (d.Name() == ".git" || d.Name() == "vendor" || exists(filepath.Join(p, "go.mod"))) {
				return filepath.SkipDir
			}
			return nil
		}
		if !d.Type().IsRegular() {
			return nil
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		w, err := z.Create(path + "@v0.1.0/" + filepath.ToSlash(rel))
		if err != nil {
			return err
		}
		_, err = w.Write(b)
		return err
	})
	if err == nil {
		err = z.Close()
	}
	if err != nil {
		t.Fatal(err)
	}
	write(t, filepath.Join(at, "v0.1.0.zip"), buf.String())
}

func exists(p string) bool { _, err := os.Stat(p); return err == nil }

func write(t *testing.T, p, s string) {
	t.Helper()
	if err := os.WriteFile(p, []byte(s), 0o644); err != nil {
		t.Fatal(err)
	}
}

func goEnv(t *testing.T, name string) string {
	t.Helper()
	out, err := exec.Command("go", "env", name).Output()
	if err != nil {
		t.Fatal(err)
	}
	return strings.TrimSpace(string(out))
}
