package api

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"hash/crc32"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"

	"github.com/chimehq/chime/internal/metrics"
	"github.com/chimehq/chime/internal/store"
	"github.com/chimehq/chime/internal/timers"
	"github.com/chimehq/chime/model"
)

// nextFireCount is how many next fire times a timer answer carries.
const nextFireCount = 5

// Page sizes of the list routes.
const (
	DefaultPageSize = 100
	MaxPageSize     = 1000
)

// timersAPI serves the timers: their creation, reading, update, deletion
// and lists (timers.go, graph.go), their counts by state (timerstates.go),
// their next fires (next.go) and the graph of the timers that run after
// them (graph.go), with the checks of the save path (saveCheck,
// handlerCheck in fleet.go, keepSecrets). Its loadTimer and timerByRef
// resolve a timer reference for the other resources too.
type timersAPI struct {
	*env
	store  TimerStore
	engine Engine
	timers *timers.Service // the save path
	apps   *appsAPI        // checks references to app secrets
	// handlerExists is Config.HandlerExists.
	handlerExists func(name string) bool
	nodeHandlers  []string // Config.NodeHandlers
	builtinsApps  []string // Config.BuiltinsApps
	// minutes and series count the failures of the failing state.
	minutes *minutesCache
	series  *metrics.Series
}

// decodeTimer decodes a timer request body into its JSON and model forms.
func (s *timersAPI) decodeTimer(w http.ResponseWriter, r *http.Request) (*Timer, *model.Timer, bool) {
	var in Timer
	if rerr := s.decodeJSON(w, r, &in); rerr != nil {
		writeError(w, rerr.code, rerr.field, rerr.message)
		return nil, nil, false
	}
	m, err := in.ToModel()
	if err != nil {
		writeValidationError(w, err)
		return nil, nil, false
	}
	return &in, m, true
}

// keepSecrets keeps the redacted secrets of m from old, the stored timer of
// an update (nil on creation, where a redacted value is refused; see
// model.Action.KeepSecrets and model.KeepNotifySecrets), and checks the
// app secrets that m's action refers to (checkAppSecretRefs). It runs
// before the save path validates m.
func (s *timersAPI) keepSecrets(w http.ResponseWriter, r *http.Request, m, old *model.Timer) bool {
	var stored *model.Action
	var storedNotify []model.NotifyRule
	if old != nil {
		stored, storedNotify = &old.Action, old.Notify
	}
	err := m.Action.KeepSecrets(stored)
	if err == nil {
		err = model.KeepNotifySecrets("notify", m.Notify, storedNotify)
	}
	if err == nil {
		if err = s.apps.checkAppSecretRefs(r.Context(), m); err != nil {
			if _, ok := fieldError(err); !ok {
				s.serverError(w, r, err)
				return false
			}
		}
	}
	if err != nil {
		writeValidationError(w, err)
		return false
	}
	return true
}

func writeValidationError(w http.ResponseWriter, err error) {
	if fe, ok := fieldError(err); ok {
		writeError(w, http.StatusBadRequest, fe.Field, fe.Message)
	} else {
		writeError(w, http.StatusBadRequest, "", err.Error())
	}
}

// fieldError extracts the *model.FieldError of err, if any.
func fieldError(err error) (*model.FieldError, bool) {
	var fe *model.FieldError
	ok := errors.As(err, &fe)
	return fe, ok
}

// forbiddenApp is the error of appCheck and reportAppsCheck: the token
// may not write in the timer's app, or name another app in it (403 on
// field, "app" when empty).
type forbiddenApp struct{ field, message string }

func (e *forbiddenApp) Error() string { return e.message }

// appCheck is the save path's check that the request's token may write in
// the timer's app; verb says what it may not do ("create timers in").
func appCheck(r *http.Request, verb string) timers.Check {
	return func(t *model.Timer) error {
		if !principalOf(r.Context()).allowsApp(t.App) {
			return &forbiddenApp{message: "this token may not " + verb + " app " + strconv.Quote(t.App)}
		}
		return nil
	}
}

// nodeHandlerCheck refuses a timer that runs a handler acting on the node
// (Config.NodeHandlers) to a principal that is not an admin of the whole
// cluster, unless the timer's app is one of Config.BuiltinsApps.
func (s *timersAPI) nodeHandlerCheck(p *principal, t *model.Timer) error {
	if t.Action.Type != model.ActionHandler || t.Action.Handler == nil || !slices.Contains(s.nodeHandlers, t.Action.Handler.Name) {
		return nil
	}
	if (p.atLeast(model.RoleAdmin) && !p.scoped()) || slices.Contains(s.builtinsApps, t.App) {
		return nil
	}
	return &forbiddenApp{field: "action.handler.name", message: "handler " + strconv.Quote(t.Action.Handler.Name) +
		" acts on the node: only an admin token may run it, or the timers of an app listed in --builtins-apps"}
}

// saveError answers the error of the save path: 400 for an invalid
// definition (a cycle named as far as the token may see it), 403 for an
// app the token may not write in, and what storeError says for the
// store's.
func (s *timersAPI) saveError(w http.ResponseWriter, r *http.Request, err error, what string) {
	var (
		forbidden *forbiddenApp
		cycle     *model.CycleError
	)
	if errors.As(err, &cycle) {
		writeError(w, http.StatusBadRequest, "after", "makes a cycle: "+visiblePath(principalOf(r.Context()), cycle.Path))
	} else if fe, ok := fieldError(err); ok {
		writeError(w, http.StatusBadRequest, fe.Field, fe.Message)
	} else if errors.As(err, &forbidden) {
		field := forbidden.field
		if field == "" {
			field = "app"
		}
		writeError(w, http.StatusForbidden, field, forbidden.message)
	} else {
		s.storeError(w, r, err, what)
	}
}

func (s *timersAPI) createTimer(w http.ResponseWriter, r *http.Request) {
	allow, ok := allowUnknownHandler(w, r)
	if !ok {
		return
	}
	_, t, ok := s.decodeTimer(w, r)
	if !ok || !s.keepSecrets(w, r, t, nil) {
		return
	}
	if err := s.afterVisible(r, t); err != nil {
		s.saveError(w, r, err, "timer")
		return
	}
	check := both(s.saveCheck(r, "create timers in"), s.handlerCheck(r.Context(), allow, nil))
	if err := s.timers.Create(r.Context(), t, check, s.auditEntry(r, "timer.create")); err != nil {
		s.saveError(w, r, err, "timer")
		return
	}
	w.Header().Set("Location", "/api/v1/timers/"+t.ID)
	writeJSON(w, http.StatusCreated, TimerFromModel(t, s.now(), nextFireCount))
}

func (s *timersAPI) getTimer(w http.ResponseWriter, r *http.Request) {
	t, ok := s.loadTimer(w, r)
	if !ok {
		return
	}
	writeJSON(w, http.StatusOK, TimerFromModel(t, s.now(), nextFireCount))
}

// loadTimer loads the timer named by the {id} path value (see timerByRef),
// answering 404 when it does not exist or is in an app the token may not
// see.
func (s *timersAPI) loadTimer(w http.ResponseWriter, r *http.Request) (*model.Timer, bool) {
	t, err := s.visibleTimer(r.Context(), r.PathValue("id"))
	if err != nil {
		s.storeError(w, r, err, "timer "+strconv.Quote(r.PathValue("id")))
		return nil, false
	}
	return t, true
}

// timerByRef loads the timer ref names: its id, or app/name (a slash
// separates them: neither an id nor an app name contains one). The caller
// checks that the token may see the timer's app.
func (s *timersAPI) timerByRef(ctx context.Context, ref string) (*model.Timer, error) {
	if app, name, ok := strings.Cut(ref, "/"); ok {
		return s.store.GetTimerByName(ctx, app, name)
	}
	return s.store.GetTimer(ctx, ref)
}

// visibleTimer is timerByRef for the request's token: a timer in an app
// the token may not see is model.ErrNotFound, as a missing one is.
func (s *timersAPI) visibleTimer(ctx context.Context, ref string) (*model.Timer, error) {
	t, err := s.timerByRef(ctx, ref)
	if err == nil && !principalOf(ctx).allowsApp(t.App) {
		return nil, model.ErrNotFound
	}
	return t, err
}

func (s *timersAPI) putTimer(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	allow, ok := allowUnknownHandler(w, r)
	if !ok {
		return
	}
	in, t, ok := s.decodeTimer(w, r)
	if !ok {
		return
	}
	// The stored timer first: redacted secrets in the body keep its values
	// before the body is validated.
	old, ok := s.loadTimer(w, r)
	if !ok {
		return
	}
	if in.ID != "" && in.ID != old.ID {
		writeError(w, http.StatusBadRequest, "id", "does not match the timer id of the URL")
		return
	}
	if !s.keepSecrets(w, r, t, old) {
		return
	}
	if err := s.afterVisible(r, t); err != nil {
		s.saveError(w, r, err, "timer "+strconv.Quote(id))
		return
	}
	check := both(s.saveCheck(r, "move timers to"), s.handlerCheck(r.Context(), allow, old))
	if _, err := s.timers.Update(r.Context(), t, old, check, s.auditEntry(r, "timer.update")); err != nil {
		s.saveError(w, r, err, "timer "+strconv.Quote(id))
		return
	}
	writeJSON(w, http.StatusOK, TimerFromModel(t, s.now(), nextFireCount))
}

// maxSearchLen bounds the search parameter of GET /api/v1/timers.
const maxSearchLen = 255

// listTimers answers GET /api/v1/timers?app=&enabled=&state=&search=&sort=&limit=&cursor=;
// search keeps timers whose name contains it, ignoring ASCII case; state
// keeps the timers of one state (StateEnabled...; failing ones come in one
// page, the most failures first); sort is id (the default) or next_fire
// (see store.SortNextFire, which says how far the stored next fire may
// lag).
func (s *timersAPI) listTimers(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	f := store.TimerFilter{App: q.Get("app"), Apps: principalOf(r.Context()).apps, NameContains: q.Get("search")}
	if len(f.NameContains) > maxSearchLen {
		writeError(w, http.StatusBadRequest, "search", "must be at most "+strconv.Itoa(maxSearchLen)+" bytes")
		return
	}
	if v := q.Get("enabled"); v != "" {
		b, err := strconv.ParseBool(v)
		if err != nil {
			writeError(w, http.StatusBadRequest, "enabled", "must be true or false")
			return
		}
		f.Enabled = &b
	}
	state := q.Get("state")
	if state != "" {
		if f.Enabled != nil {
			writeError(w, http.StatusBadRequest, "state", "give state or enabled, not both")
			return
		}
		if state != StateFailing && !stateFilter(&f, state) {
			writeError(w, http.StatusBadRequest, "state", "must be one of enabled, paused, disabled, failing")
			return
		}
	}
	kind := timerCursor
	switch v := q.Get("sort"); v {
	case "", "id":
	case store.SortNextFire:
		f.Sort, kind = store.SortNextFire, nextFireCursor
	default:
		writeError(w, http.StatusBadRequest, "sort", "must be id or next_fire")
		return
	}
	var ok bool
	if f.Limit, f.After, ok = page(w, q, kind); !ok {
		return
	}
	var list []*model.Timer
	var next string
	var err error
	if state == StateFailing {
		// One page, the most failures first.
		list, err = s.failingTimers(r.Context(), f)
		list = list[:min(len(list), f.Limit)]
	} else {
		list, next, err = s.store.ListTimers(r.Context(), f)
	}
	if err != nil {
		s.serverError(w, r, err)
		return
	}
	now := s.now()
	out := TimerList{Timers: make([]*Timer, 0, len(list)), NextCursor: encodeCursor(next, kind)}
	for _, t := range list {
		out.Timers = append(out.Timers, TimerFromModel(t, now, nextFireCount))
	}
	writeJSON(w, http.StatusOK, out)
}

// page reads the limit and cursor query parameters of a list whose cursors
// are of kind, answering 400 (and false) when either is bad.
func page(w http.ResponseWriter, q url.Values, kind string) (limit int, cursor string, ok bool) {
	var rerr *requestError
	if limit, rerr = pageLimit(q.Get("limit")); rerr == nil {
		cursor, rerr = decodeCursor(q.Get("cursor"), kind)
	}
	if rerr != nil {
		writeError(w, rerr.code, rerr.field, rerr.message)
		return 0, "", false
	}
	return limit, cursor, true
}

func pageLimit(v string) (int, *requestError) {
	if v == "" {
		return DefaultPageSize, nil
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 1 || n > MaxPageSize {
		return 0, badRequest("limit", "must be a whole number from 1 to %d", MaxPageSize)
	}
	return n, nil
}

// Cursor kinds: a cursor of one list is refused by the other.
const (
	timerCursor    = "t"
	nextFireCursor = "f" // of the timers by next fire
	runCursor      = "r"
)

// encodeCursor wraps a store cursor so that clients treat it as opaque: the
// list kind, a CRC-32 of the store cursor, and the store cursor. The
// checksum lets decodeCursor refuse a damaged or hand-made cursor with a
// 400 instead of passing it to the store, which would fail with a 500.
func encodeCursor(c, kind string) string {
	if c == "" {
		return ""
	}
	return base64.RawURLEncoding.EncodeToString(fmt.Appendf(nil, "%s%08x%s", kind, crc32.ChecksumIEEE([]byte(c)), c))
}

// decodeCursor unwraps a cursor made by encodeCursor.
func decodeCursor(c, kind string) (string, *requestError) {
	if c == "" {
		return "", nil
	}
	bad := badRequest("cursor", "is not a cursor of this list: pass next_cursor from the previous page")
	b, err := base64.RawURLEncoding.DecodeString(c)
	if err != nil || len(b) <= len(kind)+8 || string(b[:len(kind)]) != kind {
		return "", bad
	}
	sum, inner := string(b[len(kind):len(kind)+8]), b[len(kind)+8:]
	if fmt.Sprintf("%08x", crc32.ChecksumIEEE(inner)) != sum {
		return "", bad
	}
	return string(inner), nil
}
