package sqlstore

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/chimehq/chime/internal/store"
	"github.com/chimehq/chime/model"
)

// securityStore keeps tokens, the audit log, the apps' signing secrets and
// their secrets.
type securityStore struct {
	*core
}

// CreateToken inserts t (ID and Hash set by the caller).
func (s *securityStore) CreateToken(ctx context.Context, t *model.Token) error {
	apps := t.Apps
	if apps == nil {
		apps = []string{}
	}
	a, err := json.Marshal(apps)
	if err != nil {
		return fmt.Errorf("create token %s: encode apps: %w", t.ID, err)
	}
	_, err = s.w.ExecContext(ctx, s.q(`INSERT INTO tokens (id, name, role, apps, hash, created_at, expires_at, last_used_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?)`),
		t.ID, t.Name, t.Role, string(a), t.Hash, nanos(t.CreatedAt), nanos(t.ExpiresAt), nanos(t.LastUsedAt))
	if err != nil {
		if isUnique(err) {
			return fmt.Errorf("create token %s: %w", t.ID, model.ErrConflict)
		}
		return fmt.Errorf("create token %s: %w", t.ID, err)
	}
	return nil
}

const tokenCols = `id, name, role, apps, hash, created_at, expires_at, last_used_at`

func scanToken(sc interface{ Scan(...any) error }) (*model.Token, error) {
	var (
		t                      model.Token
		apps                   string
		created, expires, used int64
	)
	if err := sc.Scan(&t.ID, &t.Name, &t.Role, &apps, &t.Hash, &created, &expires, &used); err != nil {
		return nil, err
	}
	if err := json.Unmarshal([]byte(apps), &t.Apps); err != nil {
		return nil, fmt.Errorf("token %s: decode apps: %w", t.ID, err)
	}
	if t.Apps == nil {
		t.Apps = []string{}
	}
	t.CreatedAt, t.ExpiresAt, t.LastUsedAt = fromNanos(created), fromNanos(expires), fromNanos(used)
	return &t, nil
}

// TokenByHash returns the token with this hash.
func (s *securityStore) TokenByHash(ctx context.Context, hash string) (*model.Token, error) {
	t, err := scanToken(s.r.QueryRowContext(ctx, s.q(`SELECT `+tokenCols+` FROM tokens WHERE hash = ?`), hash))
	if errors.Is(err, sql.ErrNoRows) {
		return nil, fmt.Errorf("token: %w", model.ErrNotFound)
	}
	if err != nil {
		return nil, fmt.Errorf("token: %w", err)
	}
	return t, nil
}

// ListTokens returns every token, oldest first.
func (s *securityStore) ListTokens(ctx context.Context) ([]*model.Token, error) {
	rows, err := s.r.QueryContext(ctx, `SELECT `+tokenCols+` FROM tokens ORDER BY created_at, id`)
	if err != nil {
		return nil, fmt.Errorf("list tokens: %w", err)
	}
	defer rows.Close()
	out := []*model.Token{}
	for rows.Next() {
		t, err := scanToken(rows)
		if err != nil {
			return nil, fmt.Errorf("list tokens: %w", err)
		}
		out = append(out, t)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("list tokens: %w", err)
	}
	return out, nil
}

// DeleteToken deletes the token id.
func (s *securityStore) DeleteToken(ctx context.Context, id string) error {
	res, err := s.w.ExecContext(ctx, s.q(`DELETE FROM tokens WHERE id = ?`), id)
	if err != nil {
		return fmt.Errorf("delete token %s: %w", id, err)
	}
	if n, err := res.RowsAffected(); err == nil && n == 0 {
		return fmt.Errorf("delete token %s: %w", id, model.ErrNotFound)
	}
	return nil
}

// TouchToken records that token id was used at at, unless it was recorded
// as used at or after it already.
func (s *securityStore) TouchToken(ctx context.Context, id string, at time.Time) error {
	_, err := s.w.ExecContext(ctx, s.q(`UPDATE tokens SET last_used_at = ? WHERE id = ? AND last_used_at < ?`), nanos(at), id, nanos(at))
	if err != nil {
		return fmt.Errorf("touch token %s: %w", id, err)
	}
	return nil
}

// HasTokens reports whether a token exists.
func (s *securityStore) HasTokens(ctx context.Context) (bool, error) {
	var n int
	err := s.r.QueryRowContext(ctx, `SELECT COUNT(*) FROM (SELECT id FROM tokens LIMIT 1) t`).Scan(&n)
	if err != nil {
		return false, fmt.Errorf("has tokens: %w", err)
	}
	return n > 0, nil
}

// AppendAudit records e.
func (s *securityStore) AppendAudit(ctx context.Context, e *model.AuditEntry) error {
	if err := s.appendAudit(ctx, s.w, e); err != nil {
		return fmt.Errorf("append audit %s %s: %w", e.Action, e.Target, err)
	}
	return nil
}

func (s *securityStore) appendAudit(ctx context.Context, ex execer, e *model.AuditEntry) error {
	_, err := ex.ExecContext(ctx, s.q(`INSERT INTO audit (id, at, token_id, token_name, remote, app, target, action, detail)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)`),
		e.ID, nanos(e.At), cleanText(e.TokenID, 64), cleanText(e.TokenName, 255), cleanText(e.Remote, 255),
		cleanText(e.App, 128), cleanText(e.Target, 128), cleanText(e.Action, 64), cleanText(e.Detail, 4096))
	return err
}

// ListAudit returns audit entries newest first.
func (s *securityStore) ListAudit(ctx context.Context, f store.AuditFilter) ([]*model.AuditEntry, string, error) {
	limit := clampLimit(f.Limit)
	where, args := appWhere(f.App, f.Apps)
	if f.Target != "" {
		where = append(where, "target = ?")
		args = append(args, f.Target)
	}
	if f.Before != "" {
		where = append(where, "id < ?")
		args = append(args, f.Before)
	}
	query := `SELECT id, at, token_id, token_name, remote, app, target, action, detail FROM audit`
	if len(where) > 0 {
		query += " WHERE " + strings.Join(where, " AND ")
	}
	query += fmt.Sprintf(" ORDER BY id DESC LIMIT %d", limit+1)
	rows, err := s.r.QueryContext(ctx, s.q(query), args...)
	if err != nil {
		return nil, "", fmt.Errorf("list audit: %w", err)
	}
	defer rows.Close()
	out := []*model.AuditEntry{}
	for rows.Next() {
		var e model.AuditEntry
		var at int64
		if err := rows.Scan(&e.ID, &at, &e.TokenID, &e.TokenName, &e.Remote, &e.App, &e.Target, &e.Action, &e.Detail); err != nil {
			return nil, "", fmt.Errorf("list audit: %w", err)
		}
		e.At = fromNanos(at)
		out = append(out, &e)
	}
	if err := rows.Err(); err != nil {
		return nil, "", fmt.Errorf("list audit: %w", err)
	}
	next := ""
	if len(out) > limit {
		out = out[:limit]
		next = out[limit-1].ID
	}
	return out, next, nil
}

// EnsureSigningSecret gives app its first signing secret unless it has one.
func (s *securityStore) EnsureSigningSecret(ctx context.Context, app, secret string, now time.Time) (bool, error) {
	var exists int
	err := s.r.QueryRowContext(ctx, s.q(`SELECT COUNT(*) FROM signing_secrets WHERE app = ?`), app).Scan(&exists)
	if err != nil {
		return false, fmt.Errorf("ensure signing secret %s: %w", app, err)
	}
	if exists > 0 {
		return false, nil
	}
	sealed, err := s.seal(secret)
	if err != nil {
		return false, fmt.Errorf("ensure signing secret %s: %w", app, err)
	}
	// Version 1 is the primary key's first value: of two nodes creating it
	// at once, one inserts and the other finds the conflict.
	_, err = s.w.ExecContext(ctx, s.q(`INSERT INTO signing_secrets (app, version, secret, created_at, expires_at) VALUES (?, 1, ?, ?, 0)`),
		app, sealed, nanos(now))
	if err != nil {
		if isUnique(err) {
			return false, nil
		}
		return false, fmt.Errorf("ensure signing secret %s: %w", app, err)
	}
	return true, nil
}

// RotateSigningSecret adds the next version of app's secret.
func (s *securityStore) RotateSigningSecret(ctx context.Context, app, secret string, now, oldUntil time.Time) (*model.SigningSecret, error) {
	sealed, err := s.seal(secret)
	if err != nil {
		return nil, fmt.Errorf("rotate signing secret %s: %w", app, err)
	}
	out := &model.SigningSecret{App: app, Secret: secret, CreatedAt: now.UTC()}
	err = s.tx(ctx, func(tx *wtx) error {
		var version int
		if err := tx.QueryRowContext(ctx, s.q(`SELECT COALESCE(MAX(version), 0) FROM signing_secrets WHERE app = ?`), app).Scan(&version); err != nil {
			return err
		}
		if _, err := tx.ExecContext(ctx, s.q(`UPDATE signing_secrets SET expires_at = ? WHERE app = ? AND (expires_at = 0 OR expires_at > ?)`),
			nanos(oldUntil), app, nanos(oldUntil)); err != nil {
			return err
		}
		out.Version = version + 1
		_, err := tx.ExecContext(ctx, s.q(`INSERT INTO signing_secrets (app, version, secret, created_at, expires_at) VALUES (?, ?, ?, ?, 0)`),
			app, out.Version, sealed, nanos(now))
		return err
	})
	if err != nil {
		if isUnique(err) {
			return nil, fmt.Errorf("rotate signing secret %s: %w", app, model.ErrConflict)
		}
		return nil, fmt.Errorf("rotate signing secret %s: %w", app, err)
	}
	return out, nil
}

// ActiveSigningSecrets returns app's unexpired secrets, newest first.
func (s *securityStore) ActiveSigningSecrets(ctx context.Context, app string, now time.Time) ([]*model.SigningSecret, error) {
	rows, err := s.r.QueryContext(ctx, s.q(`SELECT version, secret, created_at, expires_at FROM signing_secrets
		WHERE app = ? AND (expires_at = 0 OR expires_at > ?) ORDER BY version DESC`), app, nanos(now))
	if err != nil {
		return nil, fmt.Errorf("signing secrets %s: %w", app, err)
	}
	defer rows.Close()
	out := []*model.SigningSecret{}
	for rows.Next() {
		sec := &model.SigningSecret{App: app}
		var created, expires int64
		var sealed string
		if err := rows.Scan(&sec.Version, &sealed, &created, &expires); err != nil {
			return nil, fmt.Errorf("signing secrets %s: %w", app, err)
		}
		if sec.Secret, err = s.open(sealed); err != nil {
			return nil, fmt.Errorf("signing secrets %s v%d: %w", app, sec.Version, err)
		}
		sec.CreatedAt = fromNanos(created)
		if expires != 0 {
			sec.ExpiresAt = fromNanos(expires)
		}
		out = append(out, sec)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("signing secrets %s: %w", app, err)
	}
	return out, nil
}

// seal and open, the encryption of secrets at rest, are in secrets.go.
