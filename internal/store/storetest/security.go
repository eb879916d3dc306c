package storetest

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/chimehq/chime/internal/store"
	"github.com/chimehq/chime/model"
)

// securityTests are the tests of API tokens, the audit log and the
// signing secrets of callbacks.
var securityTests = []test{
	{"Tokens", testTokens},
	{"Audit", testAudit},
	{"SigningSecrets", testSigningSecrets},
	{"TokenExpiryAndUse", testTokenExpiryAndUse},
}

// testTokenExpiryAndUse: a token keeps its expiry, and records its last
// use, never going back in time.
func testTokenExpiryAndUse(t *testing.T, s store.Store) {
	ctx := context.Background()
	exp := base.Add(720 * time.Hour)
	if err := s.CreateToken(ctx, &model.Token{ID: "tokx", Name: "temp", Role: model.RoleRead, Hash: "hx", CreatedAt: base, ExpiresAt: exp}); err != nil {
		t.Fatalf("CreateToken: %v", err)
	}
	got, err := s.TokenByHash(ctx, "hx")
	if err != nil || !got.ExpiresAt.Equal(exp) || !got.LastUsedAt.IsZero() {
		t.Fatalf("TokenByHash = %+v, %v; want expires %v, never used", got, err, exp)
	}
	used := base.Add(time.Minute)
	for _, at := range []time.Time{used, base} { // the older use does not win
		if err := s.TouchToken(ctx, "tokx", at); err != nil {
			t.Fatalf("TouchToken: %v", err)
		}
	}
	if err := s.TouchToken(ctx, "missing", used); err != nil {
		t.Errorf("TouchToken of a missing token: %v", err)
	}
	list, err := s.ListTokens(ctx)
	if err != nil || len(list) != 1 || !list[0].LastUsedAt.Equal(used) || !list[0].ExpiresAt.Equal(exp) {
		t.Fatalf("ListTokens = %+v, %v; want last used %v", list, err, used)
	}
}

// testTokens: tokens are created with a unique hash, found by it, listed
// and deleted once.
func testTokens(t *testing.T, s store.Store) {
	ctx := context.Background()
	if has, err := s.HasTokens(ctx); err != nil || has {
		t.Fatalf("HasTokens on an empty store = %v, %v; want false", has, err)
	}
	a := &model.Token{ID: "tok1", Name: "ci", Role: model.RoleWrite, Apps: []string{"billing", "ops"}, Hash: "h1", CreatedAt: base}
	b := &model.Token{ID: "tok2", Name: "admin", Role: model.RoleAdmin, Hash: "h2", CreatedAt: base.Add(time.Second)}
	for _, tok := range []*model.Token{a, b} {
		if err := s.CreateToken(ctx, tok); err != nil {
			t.Fatalf("CreateToken %s: %v", tok.ID, err)
		}
	}
	if err := s.CreateToken(ctx, &model.Token{ID: "tok3", Name: "dup", Role: model.RoleRead, Hash: "h1", CreatedAt: base}); !errors.Is(err, model.ErrConflict) {
		t.Errorf("CreateToken with a taken hash: %v, want ErrConflict", err)
	}
	got, err := s.TokenByHash(ctx, "h1")
	if err != nil {
		t.Fatalf("TokenByHash: %v", err)
	}
	if got.ID != "tok1" || got.Name != "ci" || got.Role != model.RoleWrite || fmt.Sprint(got.Apps) != "[billing ops]" || !got.CreatedAt.Equal(base) {
		t.Errorf("TokenByHash = %+v", got)
	}
	if _, err := s.TokenByHash(ctx, "nope"); !errors.Is(err, model.ErrNotFound) {
		t.Errorf("TokenByHash unknown: %v, want ErrNotFound", err)
	}
	list, err := s.ListTokens(ctx)
	if err != nil || len(list) != 2 || list[0].ID != "tok1" || list[1].ID != "tok2" || list[1].Apps == nil {
		t.Fatalf("ListTokens = %v, %v", list, err)
	}
	if has, err := s.HasTokens(ctx); err != nil || !has {
		t.Errorf("HasTokens = %v, %v; want true", has, err)
	}
	if err := s.DeleteToken(ctx, "tok1"); err != nil {
		t.Fatalf("DeleteToken: %v", err)
	}
	if err := s.DeleteToken(ctx, "tok1"); !errors.Is(err, model.ErrNotFound) {
		t.Errorf("DeleteToken twice: %v, want ErrNotFound", err)
	}
	if _, err := s.TokenByHash(ctx, "h1"); !errors.Is(err, model.ErrNotFound) {
		t.Errorf("TokenByHash after delete: %v, want ErrNotFound", err)
	}
}

// testAudit: the audit log pages newest first and filters by app, apps and
// target.
func testAudit(t *testing.T, s store.Store) {
	ctx := context.Background()
	for i := range 5 {
		app := "a"
		if i%2 == 1 {
			app = "b"
		}
		e := &model.AuditEntry{ID: fmt.Sprintf("01AUDIT%03d", i), At: base.Add(time.Duration(i) * time.Second),
			TokenID: "tok1", TokenName: "ci", Remote: "127.0.0.1:5000", App: app, Target: fmt.Sprintf("t%d", i%3),
			Action: "timer.update", Detail: "d"}
		if err := s.AppendAudit(ctx, e); err != nil {
			t.Fatalf("AppendAudit: %v", err)
		}
	}
	all, next, err := s.ListAudit(ctx, store.AuditFilter{Limit: 3})
	if err != nil || len(all) != 3 || next == "" || all[0].ID != "01AUDIT004" || all[2].ID != "01AUDIT002" {
		t.Fatalf("ListAudit page 1 = %v, %q, %v", all, next, err)
	}
	if e := all[0]; !e.At.Equal(base.Add(4*time.Second)) || e.TokenName != "ci" || e.Remote != "127.0.0.1:5000" || e.Action != "timer.update" || e.Detail != "d" {
		t.Errorf("entry = %+v", e)
	}
	rest, next, err := s.ListAudit(ctx, store.AuditFilter{Limit: 3, Before: next})
	if err != nil || len(rest) != 2 || next != "" || rest[1].ID != "01AUDIT000" {
		t.Fatalf("ListAudit page 2 = %v, %q, %v", rest, next, err)
	}
	for _, tc := range []struct {
		f    store.AuditFilter
		want int
	}{
		{store.AuditFilter{App: "a"}, 3},
		{store.AuditFilter{Apps: []string{"b"}}, 2},
		{store.AuditFilter{Apps: []string{"a", "b"}}, 5},
		{store.AuditFilter{Apps: []string{"c"}}, 0},
		{store.AuditFilter{Target: "t0"}, 2},
		{store.AuditFilter{App: "a", Target: "t1"}, 1},
		{store.AuditFilter{App: "b", Target: "t2"}, 0},
	} {
		got, _, err := s.ListAudit(ctx, tc.f)
		if err != nil || len(got) != tc.want {
			t.Errorf("ListAudit(%+v) = %d entries, %v; want %d", tc.f, len(got), err, tc.want)
		}
	}
}

// testSigningSecrets: concurrent first timers of an app make one secret;
// rotation keeps the old secret until its expiry, and never shortens a
// later expiry.
func testSigningSecrets(t *testing.T, s store.Store) {
	ctx := context.Background()
	if got, err := s.ActiveSigningSecrets(ctx, "billing", base); err != nil || len(got) != 0 {
		t.Fatalf("ActiveSigningSecrets before any = %v, %v", got, err)
	}
	// Concurrent first timers of an app make one secret.
	var wg sync.WaitGroup
	created := make(chan bool, 8)
	for i := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			ok, err := s.EnsureSigningSecret(ctx, "billing", fmt.Sprintf("whsec_%d", i), base)
			if err != nil {
				t.Errorf("EnsureSigningSecret: %v", err)
			}
			created <- ok
		}()
	}
	wg.Wait()
	close(created)
	n := 0
	for ok := range created {
		if ok {
			n++
		}
	}
	if n != 1 {
		t.Errorf("%d concurrent EnsureSigningSecret calls created a secret, want 1", n)
	}
	first, err := s.ActiveSigningSecrets(ctx, "billing", base)
	if err != nil || len(first) != 1 || first[0].Version != 1 || !first[0].ExpiresAt.IsZero() {
		t.Fatalf("ActiveSigningSecrets = %v, %v", first, err)
	}
	rot, err := s.RotateSigningSecret(ctx, "billing", "whsec_new", base.Add(time.Hour), base.Add(25*time.Hour))
	if err != nil || rot.Version != 2 || rot.Secret != "whsec_new" {
		t.Fatalf("RotateSigningSecret = %+v, %v", rot, err)
	}
	if ok, err := s.EnsureSigningSecret(ctx, "billing", "whsec_other", base); err != nil || ok {
		t.Errorf("EnsureSigningSecret after rotation = %v, %v; want false", ok, err)
	}
	both, err := s.ActiveSigningSecrets(ctx, "billing", base.Add(2*time.Hour))
	if err != nil || len(both) != 2 || both[0].Secret != "whsec_new" || both[1].Secret != first[0].Secret || !both[1].ExpiresAt.Equal(base.Add(25*time.Hour)) {
		t.Fatalf("ActiveSigningSecrets during the overlap = %v, %v", both, err)
	}
	after, err := s.ActiveSigningSecrets(ctx, "billing", base.Add(26*time.Hour))
	if err != nil || len(after) != 1 || after[0].Version != 2 {
		t.Fatalf("ActiveSigningSecrets after the overlap = %v, %v", after, err)
	}
	// A second rotation shortens nothing that expires sooner.
	if _, err := s.RotateSigningSecret(ctx, "billing", "whsec_third", base.Add(3*time.Hour), base.Add(48*time.Hour)); err != nil {
		t.Fatal(err)
	}
	third, _ := s.ActiveSigningSecrets(ctx, "billing", base.Add(4*time.Hour))
	if len(third) != 3 || !third[2].ExpiresAt.Equal(base.Add(25*time.Hour)) || !third[1].ExpiresAt.Equal(base.Add(48*time.Hour)) {
		t.Errorf("after a second rotation = %v", third)
	}
	if other, _ := s.ActiveSigningSecrets(ctx, "ops", base); len(other) != 0 {
		t.Errorf("another app's secrets = %v", other)
	}
}
