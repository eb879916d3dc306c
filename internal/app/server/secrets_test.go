package server

import (
	"bytes"
	"database/sql"
	"encoding/base64"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chimehq/chime/internal/base/testenv"
)

// call sends a JSON request and returns the status and the answer.
func call(t *testing.T, method, url string, body any) (int, []byte) {
	t.Helper()
	code, _, b := testenv.Call(t, nil, method, url, "", body)
	return code, b
}

// triggerAndWait triggers timer id and returns its run once it ended.
func triggerAndWait(t *testing.T, base, id string) map[string]any {
	t.Helper()
	code, b := call(t, "POST", base+"/api/v1/timers/"+id+"/trigger", nil)
	if code != http.StatusCreated {
		t.Fatalf("trigger: %d %s", code, b)
	}
	var run map[string]any
	json.Unmarshal(b, &run)
	// A wait for a condition, in the shape of testenv.Eventually (issue
	// 13), which can replace it once the helper is on this branch.
	deadline := time.Now().Add(15 * time.Second)
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	for ; time.Now().Before(deadline); <-tick.C {
		_, b := call(t, "GET", base+"/api/v1/runs/"+run["id"].(string), nil)
		var got map[string]any
		json.Unmarshal(b, &got)
		if s := got["status"]; s == "succeeded" || s == "failed" {
			return got
		}
	}
	t.Fatalf("run %s did not end", run["id"])
	return nil
}

func createdID(t *testing.T, code int, b []byte) string {
	t.Helper()
	if code != http.StatusCreated {
		t.Fatalf("create: %d %s", code, b)
	}
	var out map[string]any
	json.Unmarshal(b, &out)
	return out["id"].(string)
}

// TestSecretsThroughServer: a node with a secret key answers secrets
// redacted, keeps them on a PUT of its GET answer, sends the real values,
// stores them encrypted, and fails clearly with another key or none.
func TestSecretsThroughServer(t *testing.T) {
	type seen struct{ auth, apiKey, user, pass string }
	got := make(chan seen, 4)
	recv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		u, p, _ := r.BasicAuth() // from the URL's userinfo
		got <- seen{r.Header.Get("Authorization"), r.Header.Get("X-Api-Key"), u, p}
	}))
	defer recv.Close()
	key := bytes.Repeat([]byte{9}, 32)
	dir := t.TempDir()
	logs := &testenv.SyncBuffer{}
	cfg := Config{DataDir: dir, DB: "sqlite://" + filepath.Join(dir, "chime.db"), SecretKey: key, AllowShell: true,
		Logger: slog.New(slog.NewTextHandler(logs, nil))}
	base, stop := runServer(t, cfg)

	hostURL := strings.Replace(recv.URL, "http://", "http://hook:url-pass-9@", 1)
	code, b := call(t, "POST", base+"/api/v1/timers", map[string]any{
		"app": "a", "name": "h", "schedule": "@every 1h",
		"action": map[string]any{"type": "http", "http": map[string]any{"url": hostURL + "/hook",
			"header": map[string]string{"X-Api-Key": "key-9", "X-Trace": "visible"}}},
	})
	id := createdID(t, code, b)
	code, b = call(t, "POST", base+"/api/v1/timers", map[string]any{
		"app": "a", "name": "auth", "schedule": "@every 1h",
		"action": map[string]any{"type": "http", "http": map[string]any{"url": recv.URL + "/auth",
			"header": map[string]string{"Authorization": "Bearer tok-9"}}},
	})
	authID := createdID(t, code, b)
	code, b = call(t, "POST", base+"/api/v1/timers", map[string]any{
		"app": "a", "name": "sh", "schedule": "@every 1h",
		"action": map[string]any{"type": "shell", "shell": map[string]any{"command": "sh", "args": []string{"-c", "echo $TOKEN_9 | rev"},
			"env": map[string]string{"TOKEN_9": "env-secret-9"}}},
	})
	shID := createdID(t, code, b)

	// GET, PUT back with another description, GET again: redacted each time.
	for _, tid := range []string{id, authID, shID} {
		code, b := call(t, "GET", base+"/api/v1/timers/"+tid, nil)
		if code != 200 || !strings.Contains(string(b), "<redacted>") {
			t.Fatalf("GET %d %s", code, b)
		}
		var cur map[string]any
		json.Unmarshal(b, &cur)
		cur["description"] = "edited"
		if code, b := call(t, "PUT", base+"/api/v1/timers/"+tid, cur); code != 200 {
			t.Fatalf("PUT %d %s", code, b)
		}
	}
	_, b = call(t, "GET", base+"/api/v1/timers", nil)
	for _, secret := range []string{"url-pass-9", "key-9", "tok-9", "env-secret-9"} {
		if strings.Contains(string(b), secret) {
			t.Errorf("list shows %q: %s", secret, b)
		}
	}
	if !strings.Contains(string(b), `"X-Trace":"visible"`) || strings.Count(string(b), `"edited"`) != 3 {
		t.Errorf("list: %s", b)
	}

	// The executor sends the real values.
	if run := triggerAndWait(t, base, id); run["status"] != "succeeded" {
		t.Fatalf("run %v", run)
	}
	if s := <-got; s.apiKey != "key-9" || s.user != "hook" || s.pass != "url-pass-9" {
		t.Errorf("receiver saw %+v", s)
	}
	if run := triggerAndWait(t, base, authID); run["status"] != "succeeded" {
		t.Fatalf("run %v", run)
	}
	if s := <-got; s.auth != "Bearer tok-9" {
		t.Errorf("receiver saw %+v", s)
	}
	if run := triggerAndWait(t, base, shID); run["status"] != "succeeded" || run["output"] != "9-terces-vne\n" {
		t.Errorf("shell run %v", run)
	}
	stop()

	// At rest: no plaintext secret in the database file's action column.
	db, err := sql.Open("sqlite", filepath.Join(dir, "chime.db"))
	if err != nil {
		t.Fatal(err)
	}
	var actions []string
	rows, err := db.Query(`SELECT action FROM timers`)
	if err != nil {
		t.Fatal(err)
	}
	for rows.Next() {
		var a string
		rows.Scan(&a)
		actions = append(actions, a)
	}
	rows.Close()
	db.Close()
	all := strings.Join(actions, "\n")
	for _, secret := range []string{"url-pass-9", "key-9", "tok-9", "env-secret-9"} {
		if strings.Contains(all, secret) {
			t.Errorf("stored in clear: %q in %s", secret, all)
		}
	}
	if strings.Count(all, "enc:v1:")+strings.Count(all, "enc%3Av1%3A") != 4 || !strings.Contains(all, "visible") {
		t.Errorf("stored actions: %s", all)
	}

	// Another key, or none: the timer cannot be read, the log says why.
	for name, k := range map[string][]byte{"wrong key": bytes.Repeat([]byte{8}, 32), "no key": nil} {
		logs := &testenv.SyncBuffer{}
		cfg.SecretKey, cfg.Logger = k, slog.New(slog.NewTextHandler(logs, nil))
		base, stop := runServer(t, cfg)
		code, b := call(t, "GET", base+"/api/v1/timers/"+authID, nil)
		if code != http.StatusInternalServerError || strings.Contains(string(b), "tok-9") {
			t.Errorf("%s: GET %d %s", name, code, b)
		}
		stop()
		if l := logs.String(); !strings.Contains(l, authID) || !strings.Contains(l, "--secret-key") {
			t.Errorf("%s: log does not say why: %s", name, l)
		}
	}
}

// TestCleanupRootsThroughAPI: cleanup_files exists only with
// --cleanup-root, and only for dirs that resolve inside one, at creation
// and at the run.
func TestCleanupRootsThroughAPI(t *testing.T) {
	timer := func(name, dir string) map[string]any {
		return map[string]any{"app": "a", "name": name, "schedule": "@every 1h",
			"action": map[string]any{"type": "handler", "handler": map[string]any{"name": "cleanup_files",
				"args": map[string]any{"dir": dir, "pattern": "*.tmp", "older_than": "1h"}}}}
	}
	root := t.TempDir()
	outside := t.TempDir()
	inside := filepath.Join(root, "in")
	os.Mkdir(inside, 0o755)

	// Without a root, an unknown handler.
	plain := startServer(t, Config{})
	code, b := call(t, "POST", plain+"/api/v1/timers", timer("c", inside))
	if code != 400 || !strings.Contains(string(b), `"field":"action.handler.name"`) || !strings.Contains(string(b), "no such handler") {
		t.Fatalf("without --cleanup-root: %d %s", code, b)
	}

	base := startServer(t, Config{CleanupRoots: []string{root}})
	link := filepath.Join(root, "link")
	if err := os.Symlink(inside, link); err != nil {
		t.Fatal(err)
	}
	outLink := filepath.Join(root, "out")
	if err := os.Symlink(outside, outLink); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name, dir string
		want      int
		message   string
	}{
		{"inside", inside, 201, ""},
		{"root", root, 201, ""},
		{"link inside", link, 201, ""},
		{"outside", outside, 400, "not inside a --cleanup-root"},
		{"link outside", outLink, 400, "not inside a --cleanup-root"},
		{"missing", filepath.Join(root, "missing"), 400, "does not resolve"},
	}
	ids := map[string]string{}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			code, b := call(t, "POST", base+"/api/v1/timers", timer(strings.ReplaceAll(tc.name, " ", "-"), tc.dir))
			if code != tc.want || !strings.Contains(string(b), tc.message) {
				t.Fatalf("%d %s, want %d %q", code, b, tc.want, tc.message)
			}
			if code == 400 && !strings.Contains(string(b), `"field":"action.handler.args"`) {
				t.Fatalf("%s", b)
			}
			if code == 201 {
				ids[tc.name] = createdID(t, code, b)
			}
		})
	}
	// The link is swapped to point outside after the creation: the run
	// fails and the file outside stays.
	victim := filepath.Join(outside, "x.tmp")
	os.WriteFile(victim, []byte("x"), 0o644)
	old := time.Now().Add(-2 * time.Hour)
	os.Chtimes(victim, old, old)
	os.Remove(link)
	if err := os.Symlink(outside, link); err != nil {
		t.Fatal(err)
	}
	run := triggerAndWait(t, base, ids["link inside"])
	if run["status"] != "failed" || !strings.Contains(run["error"].(string), "not inside a --cleanup-root") {
		t.Errorf("run after the swap: %v", run)
	}
	if _, err := os.Stat(victim); err != nil {
		t.Errorf("file outside removed: %v", err)
	}
}

// TestShellAllowThroughAPI: --shell-allow refuses other commands at
// creation, and at the run of a timer stored before the list changed.
func TestShellAllowThroughAPI(t *testing.T) {
	dir := t.TempDir()
	cfg := Config{DataDir: dir, DB: "sqlite://" + filepath.Join(dir, "chime.db"), AllowShell: true, ShellAllow: []string{"echo"}}
	base, stop := runServer(t, cfg)
	shell := func(name, cmd string) map[string]any {
		return map[string]any{"app": "a", "name": name, "schedule": "@every 1h",
			"action": map[string]any{"type": "shell", "shell": map[string]any{"command": cmd, "args": []string{"hi"}}}}
	}
	code, b := call(t, "POST", base+"/api/v1/timers", shell("echo", "echo"))
	id := createdID(t, code, b)
	code, b = call(t, "POST", base+"/api/v1/timers", shell("sh", "sh"))
	if code != 400 || !strings.Contains(string(b), `"field":"action.shell.command"`) || !strings.Contains(string(b), "--shell-allow") {
		t.Fatalf("sh: %d %s", code, b)
	}
	if run := triggerAndWait(t, base, id); run["status"] != "succeeded" || run["output"] != "hi\n" {
		t.Fatalf("allowed run %v", run)
	}
	stop()
	cfg.ShellAllow = []string{"true"}
	base, _ = runServer(t, cfg)
	if run := triggerAndWait(t, base, id); run["status"] != "failed" || !strings.Contains(run["error"].(string), "--shell-allow") {
		t.Fatalf("run after the list changed: %v", run)
	}
}

// TestFreshDataDirModes: the data dir, the node id and the database that
// chime creates are the owner's only.
func TestFreshDataDirModes(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "fresh", "data")
	_, stop := runServer(t, Config{DataDir: dir, SecretKey: bytes.Repeat([]byte{1}, 32)})
	stop()
	for name, want := range map[string]os.FileMode{
		dir: 0o700, filepath.Join(dir, "node-id"): 0o600, filepath.Join(dir, "chime.db"): 0o600,
	} {
		fi, err := os.Stat(name)
		if err != nil {
			t.Fatal(err)
		}
		if got := fi.Mode().Perm(); got&^want != 0 {
			t.Errorf("%s: mode %04o, want at most %04o", name, got, want)
		}
	}
}

func TestBadSecretKeyLength(t *testing.T) {
	dir := t.TempDir()
	err := Run(t.Context(), Config{Listen: "127.0.0.1:0", DataDir: dir, SecretKey: []byte(base64.StdEncoding.EncodeToString(make([]byte, 32))),
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err == nil || !strings.Contains(err.Error(), "secret key") {
		t.Fatalf("Run with a 44-byte key: %v", err)
	}
}
