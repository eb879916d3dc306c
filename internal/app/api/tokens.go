package api

import (
	"context"
	"net/http"
	"regexp"
	"slices"
	"strconv"
	"time"

	"github.com/oklog/ulid/v2"

	"github.com/chimehq/chime/internal/store"
	"github.com/chimehq/chime/internal/timers"
	"github.com/chimehq/chime/model"
)

// securityAPI serves the tokens (POST, GET /api/v1/tokens, DELETE
// /api/v1/tokens/{id}) and the audit log (GET /api/v1/audit).
type securityAPI struct {
	*env
	store SecurityStore
	auth  *authenticator // told of created and deleted tokens
}

// TokenRequest is the body of POST /api/v1/tokens. ExpiresAt (RFC 3339)
// or TTL (a Go duration from now, such as "720h"), not both, makes the
// token stop working then; with neither it works until revoked.
type TokenRequest struct {
	Name      string     `json:"name"`
	Role      string     `json:"role"`
	Apps      []string   `json:"apps,omitempty"`
	ExpiresAt *time.Time `json:"expires_at,omitempty"`
	TTL       string     `json:"ttl,omitempty"`
}

// Token describes an API token. Token, the secret, is set only in the
// answer that creates it. ExpiresAt is absent for a token that does not
// expire; LastUsedAt, to the minute, for one never used.
type Token struct {
	ID         string     `json:"id"`
	Name       string     `json:"name"`
	Role       string     `json:"role"`
	Apps       []string   `json:"apps"`
	CreatedAt  time.Time  `json:"created_at"`
	ExpiresAt  *time.Time `json:"expires_at,omitempty"`
	LastUsedAt *time.Time `json:"last_used_at,omitempty"`
	Token      string     `json:"token,omitempty"`
}

// TokenList is the answer of GET /api/v1/tokens.
type TokenList struct {
	Tokens []*Token `json:"tokens"`
}

// AuditList is the answer of GET /api/v1/audit.
type AuditList struct {
	Entries    []*model.AuditEntry `json:"entries"`
	NextCursor string              `json:"next_cursor,omitempty"`
}

func tokenFromModel(t *model.Token) *Token {
	apps := t.Apps
	if apps == nil {
		apps = []string{}
	}
	out := &Token{ID: t.ID, Name: t.Name, Role: t.Role, Apps: apps, CreatedAt: t.CreatedAt.UTC()}
	if !t.ExpiresAt.IsZero() {
		at := t.ExpiresAt.UTC()
		out.ExpiresAt = &at
	}
	if !t.LastUsedAt.IsZero() {
		at := t.LastUsedAt.UTC()
		out.LastUsedAt = &at
	}
	return out
}

// tokenNamePattern is what a token's name may be.
var tokenNamePattern = regexp.MustCompile(`^[\p{L}\p{N} ._:/@-]{1,128}$`)

func (s *securityAPI) createToken(w http.ResponseWriter, r *http.Request) {
	var in TokenRequest
	if rerr := s.decodeJSON(w, r, &in); rerr != nil {
		writeError(w, rerr.code, rerr.field, rerr.message)
		return
	}
	switch {
	case in.Name == "":
		writeError(w, http.StatusBadRequest, "name", "is required")
		return
	case !tokenNamePattern.MatchString(in.Name):
		writeError(w, http.StatusBadRequest, "name", "must be 1 to 128 letters, digits, spaces or ._:/@-")
		return
	case model.RoleRank(in.Role) == 0:
		writeError(w, http.StatusBadRequest, "role", "must be read, write or admin")
		return
	}
	for i, app := range in.Apps {
		if err := timers.ValidateIdent("apps["+strconv.Itoa(i)+"]", app); err != nil {
			fe, _ := fieldError(err)
			writeError(w, http.StatusBadRequest, fe.Field, fe.Message)
			return
		}
	}
	now := s.now().UTC()
	var expires time.Time
	switch {
	case in.ExpiresAt != nil && in.TTL != "":
		writeError(w, http.StatusBadRequest, "ttl", "give expires_at or ttl, not both")
		return
	case in.ExpiresAt != nil:
		if !in.ExpiresAt.After(now) {
			writeError(w, http.StatusBadRequest, "expires_at", "must be in the future")
			return
		}
		expires = in.ExpiresAt.UTC()
	case in.TTL != "":
		d, err := time.ParseDuration(in.TTL)
		if err != nil || d <= 0 {
			writeError(w, http.StatusBadRequest, "ttl", "must be a positive Go duration such as 720h")
			return
		}
		expires = now.Add(d)
	}
	secret := NewToken()
	t := &model.Token{ID: "tok_" + ulid.Make().String(), Name: in.Name, Role: in.Role, Apps: in.Apps,
		Hash: HashToken(secret), CreatedAt: now, ExpiresAt: expires}
	if err := s.store.CreateToken(r.Context(), t); err != nil {
		s.serverError(w, r, err)
		return
	}
	s.auth.tokenCreated()
	detail := t.Name + " (" + t.Role + ")"
	if !expires.IsZero() {
		detail += ", expires " + expires.Format(time.RFC3339)
	}
	s.audit(r, "token.create", "", t.ID, detail)
	out := tokenFromModel(t)
	out.Token = secret
	w.Header().Set("Location", "/api/v1/tokens/"+t.ID)
	w.Header().Set("Cache-Control", "no-store")
	writeJSON(w, http.StatusCreated, out)
}

func (s *securityAPI) listTokens(w http.ResponseWriter, r *http.Request) {
	toks, err := s.store.ListTokens(r.Context())
	if err != nil {
		s.serverError(w, r, err)
		return
	}
	out := TokenList{Tokens: make([]*Token, 0, len(toks))}
	for _, t := range toks {
		out.Tokens = append(out.Tokens, tokenFromModel(t))
	}
	writeJSON(w, http.StatusOK, out)
}

func (s *securityAPI) deleteToken(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	// Find it first, to drop it from this node's cache and to name it in
	// the audit log.
	toks, err := s.store.ListTokens(r.Context())
	if err != nil {
		s.serverError(w, r, err)
		return
	}
	var found *model.Token
	for _, t := range toks {
		if t.ID == id {
			found = t
		}
	}
	if found == nil {
		writeError(w, http.StatusNotFound, "", "token "+strconv.Quote(id)+" not found")
		return
	}
	if err := s.store.DeleteToken(r.Context(), id); err != nil {
		s.storeError(w, r, err, "token "+strconv.Quote(id))
		return
	}
	s.auth.forget(found.Hash)
	s.audit(r, "token.revoke", "", id, found.Name)
	w.WriteHeader(http.StatusNoContent)
}

// auditCursor is the cursor kind of the audit list.
const auditCursor = "a"

// listAudit answers GET /api/v1/audit?app=&target=&limit=&cursor=: every
// entry to admin tokens; to tokens scoped to apps, their apps' entries,
// without who made them unless a token within their apps did
// (hideOtherTokens).
func (s *securityAPI) listAudit(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	p := principalOf(r.Context())
	f := store.AuditFilter{App: q.Get("app"), Target: q.Get("target"), Apps: p.apps}
	var ok bool
	if f.Limit, f.Before, ok = page(w, q, auditCursor); !ok {
		return
	}
	entries, next, err := s.store.ListAudit(r.Context(), f)
	if err == nil && p.scoped() {
		err = s.hideOtherTokens(r.Context(), p, entries)
	}
	if err != nil {
		s.serverError(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, AuditList{Entries: entries, NextCursor: encodeCursor(next, auditCursor)})
}

// hideOtherTokens blanks, for p (a token scoped to apps), the token id,
// token name and remote address of each entry made by a token that is not
// scoped to apps among p's own: the bootstrap admin token, tokens of the
// whole cluster, tokens of other apps too, and tokens revoked since.
func (s *securityAPI) hideOtherTokens(ctx context.Context, p *principal, entries []*model.AuditEntry) error {
	tokens, err := s.store.ListTokens(ctx)
	if err != nil {
		return err
	}
	within := map[string]bool{}
	for _, t := range tokens {
		within[t.ID] = t.Scoped() && !slices.ContainsFunc(t.Apps, func(app string) bool { return !p.allowsApp(app) })
	}
	for _, e := range entries {
		if !within[e.TokenID] {
			e.TokenID, e.TokenName, e.Remote = "", "", ""
		}
	}
	return nil
}
