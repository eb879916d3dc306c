package server

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"strings"

	"github.com/chimehq/chime/api"
	"github.com/chimehq/chime/model"
)

// validateHandlerArgs checks the args of handler actions in timer create
// and update requests with the handler's own validator (see
// chime.ArgsValidator) before the API sees them, and answers 400 with the
// API's error shape, field action.handler.args, when they are refused.
//
// It exists because api.ValidateOptions has no hook for handler args yet;
// with a ValidateArgs func(name string, args json.RawMessage) error field
// there, the API would call it after its own validation and this wrapper
// would go.
func validateHandlerArgs(next http.Handler, validate func(name string, args []byte) error) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		isTimerWrite := (r.Method == http.MethodPost && strings.TrimSuffix(r.URL.Path, "/") == "/api/v1/timers") ||
			(r.Method == http.MethodPut && strings.HasPrefix(r.URL.Path, "/api/v1/timers/") &&
				!strings.Contains(strings.TrimPrefix(r.URL.Path, "/api/v1/timers/"), "/"))
		if !isTimerWrite || r.Body == nil {
			next.ServeHTTP(w, r)
			return
		}
		body, err := io.ReadAll(io.LimitReader(r.Body, api.DefaultMaxBodyBytes+1))
		r.Body.Close()
		r.Body = io.NopCloser(bytes.NewReader(body))
		if err != nil {
			next.ServeHTTP(w, r)
			return
		}
		var in struct {
			Action struct {
				Type    string               `json:"type"`
				Handler *model.HandlerAction `json:"handler"`
			} `json:"action"`
		}
		// A body that does not decode is the API's to refuse.
		if json.Unmarshal(body, &in) == nil && in.Action.Type == model.ActionHandler &&
			in.Action.Handler != nil && in.Action.Handler.Name != "" {
			if err := validate(in.Action.Handler.Name, in.Action.Handler.Args); err != nil {
				field, msg := "action.handler.args", err.Error()
				if fe, ok := err.(*model.FieldError); ok {
					field, msg = fe.Field, fe.Message
				}
				w.Header().Set("Content-Type", "application/json")
				w.WriteHeader(http.StatusBadRequest)
				_ = json.NewEncoder(w).Encode(api.ErrorBody{Error: api.ErrorDetail{Field: field, Message: msg}})
				return
			}
		}
		next.ServeHTTP(w, r)
	})
}
