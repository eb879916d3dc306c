package api

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"reflect"
	"slices"
	"strings"
)

// writeJSON writes v as the JSON answer with status code.
func writeJSON(w http.ResponseWriter, code int, v any) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		// Our own types always encode; this is a programming error.
		code = http.StatusInternalServerError
		buf.Reset()
		buf.WriteString(`{"error":{"message":"internal server error"}}` + "\n")
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(code)
	_, _ = w.Write(buf.Bytes())
}

// writeError writes the JSON error shape.
func writeError(w http.ResponseWriter, code int, field, msg string) {
	writeJSON(w, code, ErrorBody{Error: ErrorDetail{Field: field, Message: msg}})
}

// requestError is a client error found while reading a request.
type requestError struct {
	code    int
	field   string
	message string
}

func (e *requestError) Error() string { return e.message }

func badRequest(field, format string, args ...any) *requestError {
	return &requestError{code: http.StatusBadRequest, field: field, message: fmt.Sprintf(format, args...)}
}

// decodeJSON reads one JSON object from the body into v, refusing unknown
// fields, trailing data and bodies over the server's limit.
func (s *env) decodeJSON(w http.ResponseWriter, r *http.Request, v any) *requestError {
	body := http.MaxBytesReader(w, r.Body, s.maxBody)
	var raw bytes.Buffer // what was read, to name an unknown field by its path
	dec := json.NewDecoder(io.TeeReader(body, &raw))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		rerr := jsonError(err, s.maxBody)
		if strings.HasPrefix(rerr.message, "unknown field") {
			if path := unknownFieldPath(raw.Bytes(), reflect.TypeOf(v), rerr.field); path != "" {
				rerr.field, rerr.message = path, fmt.Sprintf("unknown field %q", path)
			}
		}
		return rerr
	}
	// Exactly one value: anything but white space after it is an error.
	if _, err := dec.Token(); err != io.EOF {
		var mbe *http.MaxBytesError
		if errors.As(err, &mbe) {
			return jsonError(err, s.maxBody)
		}
		return badRequest("", "invalid JSON: unexpected data after the object")
	}
	return nil
}

// jsonError maps a decoding error to a client error.
func jsonError(err error, limit int64) *requestError {
	var (
		mbe *http.MaxBytesError
		se  *json.SyntaxError
		ute *json.UnmarshalTypeError
	)
	switch {
	case errors.As(err, &mbe):
		return &requestError{code: http.StatusRequestEntityTooLarge, message: fmt.Sprintf("request body is larger than %d bytes", limit)}
	case errors.Is(err, io.EOF):
		return badRequest("", "request body is empty: a JSON object is required")
	case errors.Is(err, io.ErrUnexpectedEOF):
		return badRequest("", "invalid JSON: unexpected end of input")
	case errors.As(err, &se):
		return badRequest("", "invalid JSON at byte %d: %s", se.Offset, strings.TrimPrefix(se.Error(), "json: "))
	case errors.As(err, &ute):
		field := ute.Field
		if field == "" {
			return badRequest("", "the request body must be a JSON object, not %s", ute.Value)
		}
		return badRequest(field, "must be %s, not %s", typeName(field, ute.Type.Kind().String()), ute.Value)
	}
	msg := err.Error()
	if name, ok := strings.CutPrefix(msg, "json: unknown field "); ok {
		name = strings.Trim(name, `"`)
		return badRequest(name, "unknown field %q", name)
	}
	return badRequest("", "invalid JSON: %s", strings.TrimPrefix(msg, "json: "))
}

// typeName names the JSON type expected for field.
func typeName(field, kind string) string {
	switch field {
	case "timeout", "retry.backoff", "retry.max_backoff":
		return `a Go duration string such as "30s"`
	}
	switch kind {
	case "string":
		return "a string"
	case "bool":
		return "a boolean"
	case "int", "int64", "float64":
		return "a number"
	case "map", "struct", "ptr":
		return "an object"
	case "slice":
		return "an array"
	}
	return "a " + kind
}

// unknownFieldPath returns the path (action.http.uri, after[1].when) of
// the first field named name in the JSON document raw that typ, the type
// decoded into, has no field for; "" when none is found.
func unknownFieldPath(raw []byte, typ reflect.Type, name string) string {
	var doc any
	if err := json.Unmarshal(raw, &doc); err != nil {
		// A document cut short (the error came first): decode what the
		// decoder read up to the error.
		d := json.NewDecoder(bytes.NewReader(raw))
		if d.Decode(&doc) != nil {
			return ""
		}
	}
	var paths []string
	walkUnknown(doc, typ, "", name, &paths)
	if len(paths) == 0 {
		return ""
	}
	slices.Sort(paths)
	return paths[0]
}

var unmarshalerType = reflect.TypeFor[json.Unmarshaler]()

// walkUnknown appends to paths the path of each key named name (ignoring
// case, as encoding/json matches) in v that typ has no field for.
func walkUnknown(v any, typ reflect.Type, prefix, name string, paths *[]string) {
	for typ.Kind() == reflect.Pointer {
		typ = typ.Elem()
	}
	if reflect.PointerTo(typ).Implements(unmarshalerType) {
		return
	}
	join := func(key string) string {
		if prefix == "" {
			return key
		}
		return prefix + "." + key
	}
	switch typ.Kind() {
	case reflect.Struct:
		obj, ok := v.(map[string]any)
		if !ok {
			return
		}
		fields := jsonFields(typ)
		for key, val := range obj {
			f, ok := fields[strings.ToLower(key)]
			switch {
			case !ok && strings.EqualFold(key, name):
				*paths = append(*paths, join(key))
			case ok:
				walkUnknown(val, f, join(key), name, paths)
			}
		}
	case reflect.Map:
		if obj, ok := v.(map[string]any); ok {
			for key, val := range obj {
				walkUnknown(val, typ.Elem(), join(key), name, paths)
			}
		}
	case reflect.Slice, reflect.Array:
		if arr, ok := v.([]any); ok {
			for i, val := range arr {
				walkUnknown(val, typ.Elem(), fmt.Sprintf("%s[%d]", prefix, i), name, paths)
			}
		}
	}
}

// jsonFields maps the lower-case JSON names of typ's fields, those of
// embedded structs included, to their types.
func jsonFields(typ reflect.Type) map[string]reflect.Type {
	out := map[string]reflect.Type{}
	for i := range typ.NumField() {
		f := typ.Field(i)
		tag := f.Tag.Get("json")
		if tag == "-" {
			continue
		}
		name, _, _ := strings.Cut(tag, ",")
		ft := f.Type
		if f.Anonymous && name == "" {
			for ft.Kind() == reflect.Pointer {
				ft = ft.Elem()
			}
			if ft.Kind() == reflect.Struct {
				for k, v := range jsonFields(ft) {
					if _, ok := out[k]; !ok {
						out[k] = v
					}
				}
				continue
			}
		}
		if !f.IsExported() {
			continue
		}
		if name == "" {
			name = f.Name
		}
		out[strings.ToLower(name)] = ft
	}
	return out
}
