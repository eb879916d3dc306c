package sqlstore

import (
	"errors"
	"fmt"
	"testing"

	"github.com/go-sql-driver/mysql"
)

// TestRetryableLostTransaction: a deadlock that rolled the transaction
// back, savepoints with it (MySQL), is retryable though the rollback to the
// savepoint failed after it; another error that lost the transaction is not,
// and the lost transaction's error does not wrap its cause (the combiner
// tells a lost transaction by that).
func TestRetryableLostTransaction(t *testing.T) {
	t.Parallel()
	s := &core{d: dialectMySQL}
	deadlock := &mysql.MySQLError{Number: 1213, Message: "Deadlock found"}
	noSavepoint := &mysql.MySQLError{Number: 1305, Message: "SAVEPOINT chime_fast does not exist"}
	for _, tc := range []struct {
		name string
		err  error
		want bool
	}{
		{"deadlock", deadlock, true},
		{"deadlock then lost savepoint", fmt.Errorf("finish runs: %w", &txLostError{cause: fmt.Errorf("batch: %w", deadlock), rollback: noSavepoint}), true},
		{"other error then lost savepoint", &txLostError{cause: errors.New("broken"), rollback: noSavepoint}, false},
		{"lost savepoint alone", noSavepoint, false},
	} {
		if got := s.retryable(tc.err); got != tc.want {
			t.Errorf("%s: retryable = %v, want %v", tc.name, got, tc.want)
		}
	}
	lost := &txLostError{cause: deadlock, rollback: noSavepoint}
	if errors.Is(lost, deadlock) {
		t.Error("a lost transaction's error wraps its cause")
	}
}
