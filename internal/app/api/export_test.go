package api

// Patterns returns the ServeMux patterns of every route of s, in the order
// they were registered.
func (s *Server) Patterns() []string { return append([]string(nil), s.patterns...) }

// OpenAPIDocument returns the embedded OpenAPI document.
func OpenAPIDocument() []byte { return openAPIDocument }
