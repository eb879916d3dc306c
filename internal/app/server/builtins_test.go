package server

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/chimehq/chime/webhook"
)

// timerNames lists the app/name of every timer through the API.
func timerNames(t *testing.T, base string) []string {
	t.Helper()
	code, b := call(t, "GET", base+"/api/v1/timers?limit=1000", nil)
	if code != http.StatusOK {
		t.Fatalf("list: %d %s", code, b)
	}
	var page struct {
		Timers []struct{ App, Name string } `json:"timers"`
	}
	if err := json.Unmarshal(b, &page); err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, tm := range page.Timers {
		names = append(names, tm.App+"/"+tm.Name)
	}
	slices.Sort(names)
	return names
}

// TestBackupRestoreThroughAPI: a backup_database timer backs up the SQLite
// store; the node is stopped, the backup copied over the database file
// (its -wal and -shm files removed), the node started again: the timers
// are those of the backup, as docs/workflows.md says.
func TestBackupRestoreThroughAPI(t *testing.T) {
	dataDir, backups := t.TempDir(), t.TempDir()
	dbFile := filepath.Join(dataDir, "chime.db")
	cfg := Config{DataDir: dataDir, DB: "sqlite://" + dbFile, OutputRoots: []string{backups}}
	base, stop := runServer(t, cfg)

	// Bad args are refused at creation, naming the field.
	code, b := call(t, "POST", base+"/api/v1/timers", map[string]any{"app": "ops", "name": "bad", "schedule": "@daily",
		"action": map[string]any{"type": "handler", "handler": map[string]any{"name": "backup_database", "args": map[string]any{"dir": backups, "keep": 0}}}})
	if code != http.StatusBadRequest || !strings.Contains(string(b), `"field":"action.handler.args"`) || !strings.Contains(string(b), "keep must be at least 1") {
		t.Fatalf("keep 0: %d %s", code, b)
	}

	createTimer(t, base, map[string]any{"app": "billing", "name": "invoices", "schedule": "@every 1h",
		"action": map[string]any{"type": "http", "http": map[string]any{"method": "POST", "url": "http://127.0.0.1:9/x"}}})
	backupID := createTimer(t, base, map[string]any{"app": "ops", "name": "nightly-backup", "schedule": "0 0 3 * * *",
		"action": map[string]any{"type": "handler", "handler": map[string]any{"name": "backup_database", "args": map[string]any{"dir": backups, "keep": 7}}}})
	run := triggerAndWait(t, base, backupID)
	if run["status"] != "succeeded" {
		t.Fatalf("backup run %v", run)
	}
	var res struct {
		File      string `json:"file"`
		SizeBytes int64  `json:"size_bytes"`
	}
	if err := json.Unmarshal([]byte(run["output"].(string)), &res); err != nil || filepath.Dir(res.File) != backups || res.SizeBytes == 0 {
		t.Fatalf("output %q: %v", run["output"], err)
	}
	// A timer made after the backup: gone once the backup is restored.
	createTimer(t, base, map[string]any{"app": "billing", "name": "after-backup", "schedule": "@every 1h",
		"action": map[string]any{"type": "http", "http": map[string]any{"method": "POST", "url": "http://127.0.0.1:9/x"}}})
	stop()

	// Restore: the backup over the database file, without the old WAL.
	b, err := os.ReadFile(res.File)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(dbFile, b, 0o600); err != nil {
		t.Fatal(err)
	}
	os.Remove(dbFile + "-wal")
	os.Remove(dbFile + "-shm")

	base, _ = runServer(t, cfg)
	if got, want := timerNames(t, base), []string{"billing/invoices", "ops/nightly-backup"}; !slices.Equal(got, want) {
		t.Fatalf("timers after the restore: %v, want %v", got, want)
	}
}

// createTimer creates timer through the API and returns its id.
func createTimer(t *testing.T, base string, timer map[string]any) string {
	t.Helper()
	code, b := call(t, "POST", base+"/api/v1/timers", timer)
	return createdID(t, code, b)
}

// TestReportWebhookThroughAPI: a generate_report timer posts its report to
// a receiver that verifies the signature with the app's signing secret
// from the API.
func TestReportWebhookThroughAPI(t *testing.T) {
	var mu sync.Mutex
	var header http.Header
	var body []byte
	recv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		mu.Lock()
		header, body = r.Header.Clone(), b
		mu.Unlock()
	}))
	defer recv.Close()
	base := startServer(t, Config{})
	id := createTimer(t, base, map[string]any{"app": "ops", "name": "daily-report", "schedule": "0 0 8 * * *",
		"action": map[string]any{"type": "handler", "handler": map[string]any{"name": "generate_report",
			"args": map[string]any{"period": "24h", "webhook": map[string]any{"url": recv.URL}}}}})
	run := triggerAndWait(t, base, id)
	if run["status"] != "succeeded" {
		t.Fatalf("report run %v", run)
	}
	code, b := call(t, "GET", base+"/api/v1/apps/ops/signing-secret", nil)
	var sec struct{ Secret string }
	if code != http.StatusOK || json.Unmarshal(b, &sec) != nil {
		t.Fatalf("secret: %d %s", code, b)
	}
	mu.Lock()
	defer mu.Unlock()
	if err := webhook.Verify(sec.Secret, header, body); err != nil {
		t.Fatalf("signature: %v", err)
	}
	var rep struct {
		Apps []string `json:"apps"`
		Runs int      `json:"runs"`
	}
	if err := json.Unmarshal(body, &rep); err != nil || !slices.Equal(rep.Apps, []string{"ops"}) || header.Get("webhook-id") != run["id"] {
		t.Fatalf("report %s (%v), headers %v", body, err, header)
	}
}
