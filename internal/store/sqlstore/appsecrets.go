package sqlstore

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/chimehq/chime/model"
)

// PutAppSecret creates or replaces the app secret (s.App, s.Name), its
// value sealed (see Options.SecretKey).
func (s *securityStore) PutAppSecret(ctx context.Context, sec *model.AppSecret) error {
	sealed, err := s.seal(sec.Value)
	if err != nil {
		return fmt.Errorf("put app secret %s/%s: %w", sec.App, sec.Name, err)
	}
	hosts, err := json.Marshal(nonNil(sec.Hosts))
	if err != nil {
		return fmt.Errorf("put app secret %s/%s: encode hosts: %w", sec.App, sec.Name, err)
	}
	commands, err := json.Marshal(nonNil(sec.Commands))
	if err != nil {
		return fmt.Errorf("put app secret %s/%s: encode commands: %w", sec.App, sec.Name, err)
	}
	query := `INSERT INTO app_secrets (app, name, value, hosts, commands, created_at, updated_at) VALUES (?, ?, ?, ?, ?, ?, ?)
		ON CONFLICT (app, name) DO UPDATE SET value = excluded.value, hosts = excluded.hosts, commands = excluded.commands,
		updated_at = excluded.updated_at`
	if s.d == dialectMySQL {
		query = `INSERT INTO app_secrets (app, name, value, hosts, commands, created_at, updated_at) VALUES (?, ?, ?, ?, ?, ?, ?)
			ON DUPLICATE KEY UPDATE value = VALUES(value), hosts = VALUES(hosts), commands = VALUES(commands),
			updated_at = VALUES(updated_at)`
	}
	if _, err := s.w.ExecContext(ctx, s.q(query), sec.App, sec.Name, sealed, string(hosts), string(commands),
		nanos(sec.CreatedAt), nanos(sec.UpdatedAt)); err != nil {
		return fmt.Errorf("put app secret %s/%s: %w", sec.App, sec.Name, err)
	}
	return nil
}

// AppSecrets returns app's secrets by name, their values opened.
func (s *securityStore) AppSecrets(ctx context.Context, app string) ([]*model.AppSecret, error) {
	rows, err := s.r.QueryContext(ctx, s.q(`SELECT name, value, hosts, commands, created_at, updated_at FROM app_secrets
		WHERE app = ? ORDER BY name`), app)
	if err != nil {
		return nil, fmt.Errorf("app secrets %s: %w", app, err)
	}
	defer rows.Close()
	out := []*model.AppSecret{}
	for rows.Next() {
		sec := &model.AppSecret{App: app}
		var sealed, hosts, commands string
		var created, updated int64
		if err := rows.Scan(&sec.Name, &sealed, &hosts, &commands, &created, &updated); err != nil {
			return nil, fmt.Errorf("app secrets %s: %w", app, err)
		}
		if sec.Value, err = s.open(sealed); err != nil {
			return nil, fmt.Errorf("app secret %s/%s: %w", app, sec.Name, err)
		}
		if err := json.Unmarshal([]byte(hosts), &sec.Hosts); err != nil {
			return nil, fmt.Errorf("app secret %s/%s: decode hosts: %w", app, sec.Name, err)
		}
		if err := json.Unmarshal([]byte(commands), &sec.Commands); err != nil {
			return nil, fmt.Errorf("app secret %s/%s: decode commands: %w", app, sec.Name, err)
		}
		sec.Hosts, sec.Commands = nonNil(sec.Hosts), nonNil(sec.Commands)
		sec.CreatedAt, sec.UpdatedAt = fromNanos(created), fromNanos(updated)
		out = append(out, sec)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("app secrets %s: %w", app, err)
	}
	return out, nil
}

// DeleteAppSecret deletes the app secret (app, name).
func (s *securityStore) DeleteAppSecret(ctx context.Context, app, name string) error {
	res, err := s.w.ExecContext(ctx, s.q(`DELETE FROM app_secrets WHERE app = ? AND name = ?`), app, name)
	if err != nil {
		return fmt.Errorf("delete app secret %s/%s: %w", app, name, err)
	}
	if n, err := res.RowsAffected(); err == nil && n == 0 {
		return fmt.Errorf("delete app secret %s/%s: %w", app, name, model.ErrNotFound)
	}
	return nil
}
