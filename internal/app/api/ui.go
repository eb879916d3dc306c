package api

import (
	"bytes"
	"crypto/sha256"
	"embed"
	"encoding/hex"
	"io/fs"
	"net/http"
	"path"
	"strings"
	"time"
)

// The web UI is internal/app/api/ui: index.html, which loads app.css and the JavaScript
// module app.js (which imports lib.js and pages/*.js) from /ui/. The server
// answers every page path (UIPaths) with index.html, and app.js draws the
// page the path names, so links can be shared and reloaded. The
// Content-Security-Policy sent with every answer (see browserGuard) runs no
// inline script or style, so the page has none. The page and its files
// are open (no token); the API calls they make are not.

//go:embed ui
var uiFS embed.FS

// uiTypes are the content types of the UI's files, set here rather than
// taken from the system's MIME table (which may say text/plain for .js,
// and X-Content-Type-Options: nosniff makes browsers refuse that).
var uiTypes = map[string]string{
	".html": "text/html; charset=utf-8",
	".js":   "text/javascript; charset=utf-8",
	".css":  "text/css; charset=utf-8",
	".svg":  "image/svg+xml",
	".png":  "image/png",
	".ico":  "image/x-icon",
}

// uiETags are the strong ETags of the embedded files, by path under ui/:
// with Cache-Control: no-cache a browser revalidates on every load and gets
// a 304 while the binary is the same.
var uiETags = func() map[string]string {
	tags := map[string]string{}
	err := fs.WalkDir(uiFS, "ui", func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := uiFS.ReadFile(p)
		if err != nil {
			return err
		}
		sum := sha256.Sum256(b)
		tags[p[len("ui/"):]] = `"` + hex.EncodeToString(sum[:16]) + `"`
		return nil
	})
	if err != nil {
		panic(err) // the embedded tree is fixed at build time
	}
	return tags
}()

// uiHeaders sets the headers of the UI file name (a path under ui/).
func uiHeaders(h http.Header, name string) {
	if ct, ok := uiTypes[path.Ext(name)]; ok {
		h.Set("Content-Type", ct)
	}
	if tag, ok := uiETags[name]; ok {
		h.Set("ETag", tag)
	}
	h.Set("Cache-Control", "no-cache")
}

// UIPaths are the route patterns of the UI's pages, each answered with
// index.html: / the dashboard, /timers the list, /timers/new and
// /timers/{id}/edit the form, /timers/{id} a timer, /runs the runs of
// every timer, /runs/{id} a run, /nodes the nodes.
var UIPaths = []string{"/", "/timers", "/timers/new", "/timers/{id}", "/timers/{id}/edit", "/runs", "/runs/{id}", "/nodes"}

// ui serves the shell of the web UI at every path of UIPaths.
func (s *Server) ui(w http.ResponseWriter, r *http.Request) {
	b, err := uiFS.ReadFile("ui/index.html")
	if err != nil {
		s.serverError(w, r, err)
		return
	}
	uiHeaders(w.Header(), "index.html")
	http.ServeContent(w, r, "index.html", time.Time{}, bytes.NewReader(b))
}

// wantsPage reports whether r is a browser asking for a page (a GET or
// HEAD outside /api/ and /ui/ that accepts HTML), to which a path of no
// route is answered with the UI's not-found page rather than JSON.
func wantsPage(r *http.Request) bool {
	return (r.Method == http.MethodGet || r.Method == http.MethodHead) && !strings.HasPrefix(r.URL.Path, "/api/") &&
		!strings.HasPrefix(r.URL.Path, "/ui/") && strings.Contains(r.Header.Get("Accept"), "text/html")
}

// uiNotFound answers 404 with index.html: app.js, finding no page at the
// path, draws its not-found page.
func uiNotFound(w http.ResponseWriter, r *http.Request) {
	b, err := uiFS.ReadFile("ui/index.html")
	if err != nil {
		writeError(w, http.StatusNotFound, "", "no route for "+r.Method+" "+r.URL.Path)
		return
	}
	w.Header().Set("Content-Type", uiTypes[".html"])
	w.Header().Set("Cache-Control", "no-cache")
	w.WriteHeader(http.StatusNotFound)
	if r.Method != http.MethodHead {
		w.Write(b)
	}
}

// uiFiles serves the UI's static files under /ui/.
func uiFiles() http.Handler {
	sub, err := fs.Sub(uiFS, "ui")
	if err != nil {
		panic(err) // the embedded tree is fixed at build time
	}
	files := http.FileServerFS(sub)
	return http.StripPrefix("/ui/", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		uiHeaders(w.Header(), r.URL.Path)
		files.ServeHTTP(w, r)
	}))
}
