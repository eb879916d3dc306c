package builtin

import (
	"context"
	"os"
	"path/filepath"
	"testing"
)

// TestLinkSwapDuringRun: backup_database and generate_report write through
// an os.Root, so a directory swapped for a link to a directory outside the
// --output-root during the run (after the directory was checked, or after
// the directory or the file was opened) never gets a file: the run fails,
// or writes into the directory it opened.
func TestLinkSwapDuringRun(t *testing.T) {
	s := openStore(t, "sqlite::memory:")
	seedReport(t, s)
	for _, tc := range []struct {
		name    string
		hook    *func()
		builtin string
		wantErr bool
	}{
		{"backup, swapped after the check", &testHookResolved, BackupDatabaseName, true},
		{"backup, swapped after the open", &testHookOpened, BackupDatabaseName, false},
		{"report, swapped after the check", &testHookResolved, GenerateReportName, true},
		{"report, swapped after the open", &testHookOpened, GenerateReportName, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			root, outside := t.TempDir(), t.TempDir()
			dir := filepath.Join(root, "out")
			if err := os.Mkdir(dir, 0o700); err != nil {
				t.Fatal(err)
			}
			swapped := false
			*tc.hook = func() {
				if swapped {
					return
				}
				swapped = true
				if err := os.Rename(dir, dir+".old"); err != nil {
					t.Error(err)
				}
				if err := os.Symlink(outside, dir); err != nil {
					t.Error(err)
				}
			}
			t.Cleanup(func() { *tc.hook = nil })
			var err error
			switch tc.builtin {
			case BackupDatabaseName:
				_, err = (&BackupDatabase{Store: s, Roots: []string{root}}).Run(context.Background(), runWith(backupArgs(dir, 2)))
			case GenerateReportName:
				g := &GenerateReport{Store: s, Roots: []string{root}}
				_, err = g.Run(context.Background(), reportRun(`{"period": "1d", "format": "json", "file": {"dir": "`+dir+`"}}`))
			}
			if !swapped {
				t.Fatal("the hook did not run")
			}
			if (err != nil) != tc.wantErr {
				t.Errorf("run: %v, want an error %v", err, tc.wantErr)
			}
			if entries, _ := os.ReadDir(outside); len(entries) != 0 {
				t.Fatalf("written outside the root: %v", entries)
			}
			if entries, _ := os.ReadDir(dir + ".old"); !tc.wantErr && len(entries) != 1 {
				t.Errorf("in the directory opened: %v, want the file", entries)
			}
		})
	}
}
