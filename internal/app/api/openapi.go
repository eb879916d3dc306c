package api

import (
	"bytes"
	_ "embed"
	"encoding/json"
	"net/http"
)

// openAPIDocument is the OpenAPI 3.1 description of every route the
// server registers, served at GET /api/v1/openapi.json. It is written by
// hand (internal/app/api/openapi.json) and kept honest by TestOpenAPI, which sends a
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
	_, _ = w.Write(s.openapi)
}

// openAPIWithVersion returns openAPIDocument with version as its
// info.version (the document itself says "1"); the document as it is for
// an empty version.
func openAPIWithVersion(version string) []byte {
	if version == "" {
		return openAPIDocument
	}
	v, err := json.Marshal(version)
	if err != nil {
		return openAPIDocument
	}
	// The first "version" of the document is info's (see openapi.json).
	old := []byte(`"version": "1"`)
	i := bytes.Index(openAPIDocument, old)
	if i < 0 {
		return openAPIDocument
	}
	out := make([]byte, 0, len(openAPIDocument)+len(v))
	out = append(out, openAPIDocument[:i]...)
	out = append(out, `"version": `...)
	out = append(out, v...)
	return append(out, openAPIDocument[i+len(old):]...)
}
