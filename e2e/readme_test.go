package e2e

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"
)

// walkthroughBlocks returns the ```sh blocks of the README's section
// "## Walkthrough", in order.
func walkthroughBlocks(readme string) ([]string, error) {
	_, section, ok := strings.Cut(readme, "\n## Walkthrough\n")
	if !ok {
		return nil, fmt.Errorf(`README has no "## Walkthrough" section`)
	}
	if i := strings.Index(section, "\n## "); i >= 0 {
		section = section[:i]
	}
	var blocks []string
	for {
		_, rest, ok := strings.Cut(section, "\n```sh\n")
		if !ok {
			return blocks, nil
		}
		block, after, ok := strings.Cut(rest, "\n```\n")
		if !ok {
			return nil, fmt.Errorf("README: a ```sh block of the walkthrough is not closed")
		}
		blocks = append(blocks, block+"\n")
		section = after
	}
}

// TestReadmeWalkthrough runs the README's walkthrough as written, in a
// fresh directory, on the ports it names: its first block (go install
// ./cmd/chime) in the module's root with GOBIN on PATH, the others in one
// bash script. The example timer's callbacks must arrive at chime echo
// with a good signature, and its runs succeed. xdg-open and open are
// stand-ins that record the URL they were given.
func TestReadmeWalkthrough(t *testing.T) {
	for _, port := range []string{"8080", "9000"} {
		ln, err := net.Listen("tcp", "127.0.0.1:"+port)
		if err != nil {
			t.Skipf("the walkthrough's port %s is in use here: %v", port, err)
		}
		ln.Close()
	}
	for _, tool := range []string{"bash", "curl"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("the walkthrough needs %s: %v", tool, err)
		}
	}
	root, err := moduleRoot()
	if err != nil {
		t.Fatal(err)
	}
	readme, err := os.ReadFile(filepath.Join(root, "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	blocks, err := walkthroughBlocks(string(readme))
	if err != nil {
		t.Fatal(err)
	}
	if len(blocks) < 2 || strings.TrimSpace(blocks[0]) != "go install ./cmd/chime" {
		t.Fatalf("the walkthrough's first sh block must be the install, `go install ./cmd/chime`; blocks: %q", blocks)
	}

	tmp := t.TempDir()
	bin := filepath.Join(tmp, "bin")
	work := filepath.Join(tmp, "work")
	opened := filepath.Join(tmp, "opened")
	for _, dir := range []string{bin, work} {
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	for _, name := range []string{"xdg-open", "open"} {
		if err := os.WriteFile(filepath.Join(bin, name), []byte("#!/bin/sh\necho \"$@\" >> "+opened+"\n"), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	env := append(os.Environ(), "PATH="+bin+string(os.PathListSeparator)+os.Getenv("PATH"), "GOBIN="+bin)
	env = slicesWithout(env, "CHIME_") // the walkthrough runs on the defaults

	install := exec.Command("bash", "-euc", blocks[0])
	install.Dir, install.Env = root, env
	if out, err := install.CombinedOutput(); err != nil {
		t.Fatalf("%s: %v\n%s", blocks[0], err, out)
	}

	script := strings.Join(blocks[1:], "\n")
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "bash", "-c", script)
	cmd.Dir, cmd.Env = work, env
	// Its own process group: the background jobs are killed with it if
	// the script fails.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	pgid := cmd.Process.Pid
	t.Cleanup(func() { _ = syscall.Kill(-pgid, syscall.SIGKILL) })
	err = cmd.Wait()
	log := out.String()
	if err != nil {
		t.Fatalf("the walkthrough failed: %v\n%s", err, log)
	}
	// The jobs stop on kill %1 %2: the ports are free again.
	waitUntil(t, 60*time.Second, "the walkthrough's processes to stop", func() (bool, string) {
		for _, port := range []string{"8080", "9000"} {
			ln, err := net.Listen("tcp", "127.0.0.1:"+port)
			if err != nil {
				return false, err.Error()
			}
			ln.Close()
		}
		return true, ""
	})

	// chime echo printed the example's callbacks, each signed right.
	callbacks := regexp.MustCompile(`(?m)^POST /ping\n`).FindAllStringIndex(log, -1)
	if len(callbacks) < 2 {
		t.Errorf("chime echo printed %d callbacks of the timer, want at least 2:\n%s", len(callbacks), log)
	}
	for _, want := range []string{"X-Chime-Run-Id: ", "X-Chime-Attempt: 1", `body: {"hello":"chime"}`} {
		if !strings.Contains(log, want) {
			t.Errorf("chime echo's output lacks %q:\n%s", want, log)
		}
	}
	if ok := strings.Count(log, "signature ok"); ok < len(callbacks) || strings.Contains(log, "signature NOT ok") || strings.Contains(log, "not checked") {
		t.Errorf("%d of %d callbacks say signature ok:\n%s", ok, len(callbacks), log)
	}
	// The run list shows the fires succeeded; the curl create answered.
	if n := regexp.MustCompile(`(?m)^[0-9a-f]{40}\s.*\ssucceeded\s`).FindAllString(log, -1); len(n) < 2 {
		t.Errorf("chime run list shows %d succeeded runs, want at least 2:\n%s", len(n), log)
	}
	if !strings.Contains(log, `"name":"report"`) && !strings.Contains(log, `"name": "report"`) {
		t.Errorf("the curl create's answer is not the report timer:\n%s", log)
	}
	if b, err := os.ReadFile(opened); err != nil || strings.TrimSpace(string(b)) != "http://127.0.0.1:8080/" {
		t.Errorf("the web UI was opened with %q (%v), want http://127.0.0.1:8080/", b, err)
	}
	if _, err := os.Stat(filepath.Join(work, "chime-data", "chime.db")); err != nil {
		t.Errorf("the node kept no data in ./chime-data: %v", err)
	}
}

// slicesWithout returns env without the variables whose names start with
// prefix.
func slicesWithout(env []string, prefix string) []string {
	out := env[:0:0]
	for _, kv := range env {
		if !strings.HasPrefix(kv, prefix) {
			out = append(out, kv)
		}
	}
	return out
}
