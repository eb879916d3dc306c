package api

import (
	_ "embed"
	"net/http"
)

// openAPIDocument is the OpenAPI 3.1 description of every route the
// server registers, served at GET /api/v1/openapi.json. It is written by
// hand (api/openapi.json) and kept honest by TestOpenAPI, which sends a
// request to every route and validates the request and the answer against
// it.
//
//go:embed openapi.json
var openAPIDocument []byte

// openAPI serves openAPIDocument. It needs no token: it describes the API
// and holds no data (see docs/security.md).
func (s *Server) openAPI(w http.ResponseWriter, r *http.Request) {
	h := w.Header()
	h.Set("Content-Type", "application/json")
	h.Set("Cache-Control", "no-cache")
	w.WriteHeader(http.StatusOK)
	_, _ = w.Write(openAPIDocument)
}
