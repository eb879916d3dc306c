package model

import (
	"errors"
	"slices"
	"time"
)

// Token roles, from least to most. Each role may do what the ones before it
// may.
const (
	// RoleRead may read: every GET.
	RoleRead = "read"
	// RoleWrite may also change timers: create, update, delete, enable,
	// disable, pause, resume, trigger and backfill.
	RoleWrite = "write"
	// RoleAdmin may do everything, managing tokens included.
	RoleAdmin = "admin"
)

// ErrForbidden: the caller is known but not allowed to do this.
var ErrForbidden = errors.New("forbidden")

// RoleRank orders the roles: read < write < admin; 0 for an unknown role.
func RoleRank(role string) int {
	switch role {
	case RoleRead:
		return 1
	case RoleWrite:
		return 2
	case RoleAdmin:
		return 3
	}
	return 0
}

// Token is an API token. Its secret is never stored: Hash is the hex
// SHA-256 of the token the caller presents.
type Token struct {
	ID   string `json:"id"`
	Name string `json:"name"`
	Role string `json:"role"`
	// Apps, when not empty, limits the token to the timers and runs of
	// these apps.
	Apps      []string  `json:"apps"`
	Hash      string    `json:"-"`
	CreatedAt time.Time `json:"created_at"`
	// ExpiresAt, when not zero, is when the token stops working.
	ExpiresAt time.Time `json:"expires_at,omitzero"`
	// LastUsedAt is when the token last authenticated a request, to the
	// minute (zero: never).
	LastUsedAt time.Time `json:"last_used_at,omitzero"`
}

// Expired reports whether t no longer works at now.
func (t *Token) Expired(now time.Time) bool { return !t.ExpiresAt.IsZero() && !now.Before(t.ExpiresAt) }

// Scoped reports whether the token is limited to some apps.
func (t *Token) Scoped() bool { return len(t.Apps) > 0 }

// AllowsApp reports whether the token may see app.
func (t *Token) AllowsApp(app string) bool { return !t.Scoped() || slices.Contains(t.Apps, app) }

// AuditEntry records one change made through the API.
type AuditEntry struct {
	ID string    `json:"id"`
	At time.Time `json:"at"`
	// TokenID and TokenName name who made the change: a token, or "admin"
	// for the bootstrap admin token (and "" when authentication is off).
	TokenID   string `json:"token_id"`
	TokenName string `json:"token_name"`
	Remote    string `json:"remote"`
	App       string `json:"app"`
	// Target is the id of what was changed: a timer, a token, an app.
	Target string `json:"target"`
	// Action is what was done: timer.create, timer.update, timer.delete,
	// timer.enable, timer.disable, timer.pause, timer.resume,
	// timer.trigger, timer.backfill, timer.detach, token.create, token.revoke,
	// secret.rotate, app.notify, app_secret.set, app_secret.delete.
	Action string `json:"action"`
	// Detail is a short free text (the run id of a trigger, a range).
	Detail string `json:"detail,omitempty"`
}

// SigningSecret is one of an app's callback signing secrets. Versions count
// from 1; the newest signs, and older ones sign too until ExpiresAt.
type SigningSecret struct {
	App     string `json:"app"`
	Version int    `json:"version"`
	// Secret is "whsec_" and the base64 of the key.
	Secret    string    `json:"secret"`
	CreatedAt time.Time `json:"created_at"`
	// ExpiresAt is when the secret stops signing; zero: never.
	ExpiresAt time.Time `json:"expires_at,omitzero"`
}
