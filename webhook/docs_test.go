package webhook_test

import (
	"bytes"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// docsFile holds the verification snippets that receivers copy.
const docsFile = "../docs/callbacks.md"

// fencedBlock returns the body of the first fenced block of language lang
// in the docs that contains marker.
func fencedBlock(t *testing.T, lang, marker string) string {
	t.Helper()
	b, err := os.ReadFile(docsFile)
	if err != nil {
		t.Fatal(err)
	}
	var (
		in    bool
		block []string
	)
	for line := range strings.SplitSeq(string(b), "\n") {
		switch {
		case !in && strings.TrimSpace(line) == "```"+lang:
			in, block = true, nil
		case in && strings.TrimSpace(line) == "```":
			in = false
			if s := strings.Join(block, "\n") + "\n"; strings.Contains(s, marker) {
				return s
			}
		case in:
			block = append(block, line)
		}
	}
	t.Fatalf("%s: no ```%s block with %q", docsFile, lang, marker)
	return ""
}

// docResult is what a snippet harness prints for each vector.
type docResult struct {
	Name  string `json:"name"`
	Valid bool   `json:"valid"`
	Err   string `json:"err"`
}

// checkResults compares the harness's answers with the vectors.
func checkResults(t *testing.T, out []byte) {
	t.Helper()
	var got []docResult
	if err := json.Unmarshal(out, &got); err != nil {
		t.Fatalf("harness output %s: %v", out, err)
	}
	vs := vectors()
	if len(got) != len(vs) {
		t.Fatalf("%d results for %d vectors", len(got), len(vs))
	}
	for i, v := range vs {
		if got[i].Name != v.Name || got[i].Valid != v.Valid {
			t.Errorf("%s: valid %v (%s), want %v", v.Name, got[i].Valid, got[i].Err, v.Valid)
		}
	}
}

func vectorsJSON(t *testing.T) []byte {
	t.Helper()
	b, err := json.Marshal(vectors())
	if err != nil {
		t.Fatal(err)
	}
	return b
}

const goHarness = `package main

import (
	"encoding/json"
	"net/http"
	"os"
	"time"
)

type vector struct {
	Name, Secret, ID, Timestamp, Signature, Body string
	Now                                         int64
}

type result struct {
	Name  string ` + "`json:\"name\"`" + `
	Valid bool   ` + "`json:\"valid\"`" + `
	Err   string ` + "`json:\"err\"`" + `
}

func main() {
	var vs []vector
	if err := json.NewDecoder(os.Stdin).Decode(&vs); err != nil {
		panic(err)
	}
	out := []result{}
	for _, v := range vs {
		h := http.Header{}
		for k, x := range map[string]string{"Webhook-Id": v.ID, "Webhook-Timestamp": v.Timestamp, "Webhook-Signature": v.Signature} {
			if x != "" {
				h.Set(k, x)
			}
		}
		err := VerifyWebhook(v.Secret, h, []byte(v.Body), time.Unix(v.Now, 0))
		r := result{Name: v.Name, Valid: err == nil}
		if err != nil {
			r.Err = err.Error()
		}
		out = append(out, r)
	}
	json.NewEncoder(os.Stdout).Encode(out)
}
`

// TestDocsGoSnippet runs the Go verification function of docs/callbacks.md,
// as written, against the vectors.
func TestDocsGoSnippet(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("builds a program")
	}
	src := fencedBlock(t, "go", "func VerifyWebhook")
	if !strings.HasPrefix(src, "package receiver\n") {
		t.Fatal("the Go snippet must start with package receiver")
	}
	dir := t.TempDir()
	files := map[string]string{
		"go.mod":      "module docsnippet\n\ngo 1.22\n",
		"receiver.go": "package main" + strings.TrimPrefix(src, "package receiver"),
		"main.go":     goHarness,
	}
	for name, body := range files {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	cmd := exec.Command("go", "run", ".")
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "GOWORK=off", "GOFLAGS=-mod=mod")
	cmd.Stdin = bytes.NewReader(vectorsJSON(t))
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go run the docs' snippet: %v\n%s", err, stderr.String())
	}
	checkResults(t, out)
}

const pyHarness = `

import json as _json
import sys as _sys

_out = []
for _v in _json.load(_sys.stdin):
    _h = {k: x for k, x in (("Webhook-Id", _v["id"]), ("Webhook-Timestamp", _v["timestamp"]), ("Webhook-Signature", _v["signature"])) if x}
    try:
        verify_webhook(_v["secret"], _h, _v["body"].encode(), now=_v["now"])
        _out.append({"name": _v["name"], "valid": True, "err": ""})
    except ValueError as e:
        _out.append({"name": _v["name"], "valid": False, "err": str(e)})
print(_json.dumps(_out))
`

// TestDocsPythonSnippet runs the Python verification function of
// docs/callbacks.md, as written, against the vectors, when python3 is
// installed.
func TestDocsPythonSnippet(t *testing.T) {
	t.Parallel()
	py, err := exec.LookPath("python3")
	if err != nil {
		t.Skip("python3 is not installed: the Python snippet of docs/callbacks.md is not checked")
	}
	src := fencedBlock(t, "python", "def verify_webhook")
	file := filepath.Join(t.TempDir(), "verify.py")
	if err := os.WriteFile(file, []byte(src+pyHarness), 0o644); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(py, file)
	cmd.Stdin = bytes.NewReader(vectorsJSON(t))
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("python3 the docs' snippet: %v\n%s", err, stderr.String())
	}
	checkResults(t, out)
}
