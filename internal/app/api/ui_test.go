package api_test

import (
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/chimehq/chime/internal/app/api"
	"github.com/chimehq/chime/internal/app/api/apitest"
	"github.com/chimehq/chime/internal/base/clock"
	"github.com/chimehq/chime/internal/base/testenv"
)

// The web UI must work under the server's Content-Security-Policy, which
// runs no inline script or style: these tests check the page and its files
// as served, and that the API answers the UI's fetch wrapper relies on.

const uiAdminToken = "ui-test-admin-token"

// newUIServer returns a test server with auth on (an admin token).
func newUIServer(t *testing.T) *httptest.Server {
	t.Helper()
	st := newStore(t)
	now := func() time.Time { return testNow }
	srv := httptest.NewServer(api.New(api.Config{
		Store:      st,
		Engine:     &apitest.FakeEngine{Store: st, Now: now},
		Logger:     discardLogger(),
		Clock:      clock.Func(now),
		AdminToken: uiAdminToken,
	}).Handler())
	t.Cleanup(srv.Close)
	return srv
}

// uiGet sends a request with the given headers ("Name", "value", ...) and
// returns the answer with its body read.
func uiGet(t *testing.T, srv *httptest.Server, method, path string, body any, header ...string) (*http.Response, string) {
	t.Helper()
	code, h, b := testenv.Call(t, srv.Client(), method, srv.URL+path, "", body, header...)
	return &http.Response{StatusCode: code, Header: h}, string(b)
}

func TestUIPageHeaders(t *testing.T) {
	t.Parallel()
	srv := newUIServer(t)
	res, body := uiGet(t, srv, "GET", "/", nil) // no token: the page itself is open
	if res.StatusCode != 200 {
		t.Fatalf("GET /: %d %s", res.StatusCode, body)
	}
	for name, want := range map[string]string{
		"Content-Type":            "text/html; charset=utf-8",
		"Content-Security-Policy": api.ContentSecurityPolicy,
		"X-Frame-Options":         "DENY",
		"X-Content-Type-Options":  "nosniff",
		"Cache-Control":           "no-cache",
	} {
		if got := res.Header.Get(name); got != want {
			t.Errorf("GET / %s: %q, want %q", name, got, want)
		}
	}
	csp := res.Header.Get("Content-Security-Policy")
	for _, d := range []string{"script-src 'self'", "style-src 'self'", "connect-src 'self'", "frame-ancestors 'none'"} {
		if !strings.Contains(csp, d) {
			t.Errorf("CSP %q lacks %q", csp, d)
		}
	}
	if !strings.Contains(body, "<title>chime</title>") {
		t.Errorf("GET / is not the UI page: %.200s", body)
	}

	// no-cache with an ETag: the browser revalidates and gets a 304.
	tag := res.Header.Get("ETag")
	if tag == "" {
		t.Fatal("GET / has no ETag")
	}
	res, _ = uiGet(t, srv, "GET", "/", nil, "If-None-Match", tag)
	if res.StatusCode != http.StatusNotModified {
		t.Errorf("GET / If-None-Match: %d, want 304", res.StatusCode)
	}
}

func TestUIStaticFiles(t *testing.T) {
	t.Parallel()
	srv := newUIServer(t)
	for path, ct := range map[string]string{
		"/ui/app.js":  "text/javascript",
		"/ui/app.css": "text/css",
	} {
		res, body := uiGet(t, srv, "GET", path, nil) // no token: static files are open
		if res.StatusCode != 200 || body == "" {
			t.Errorf("GET %s: %d, %d bytes", path, res.StatusCode, len(body))
			continue
		}
		if got := res.Header.Get("Content-Type"); !strings.HasPrefix(got, ct) {
			t.Errorf("GET %s Content-Type: %q, want %s", path, got, ct)
		}
		if got := res.Header.Get("Content-Security-Policy"); got != api.ContentSecurityPolicy {
			t.Errorf("GET %s CSP: %q", path, got)
		}
		if got := res.Header.Get("Cache-Control"); got != "no-cache" {
			t.Errorf("GET %s Cache-Control: %q", path, got)
		}
		tag := res.Header.Get("ETag")
		if tag == "" {
			t.Errorf("GET %s has no ETag", path)
			continue
		}
		if res, _ := uiGet(t, srv, "GET", path, nil, "If-None-Match", tag); res.StatusCode != http.StatusNotModified {
			t.Errorf("GET %s If-None-Match: %d, want 304", path, res.StatusCode)
		}
	}
}

// TestUIPageCSPClean parses the served page: every script is a file of
// the server's own, and there is no inline script, style or handler.
func TestUIPageCSPClean(t *testing.T) {
	t.Parallel()
	srv := newUIServer(t)
	_, page := uiGet(t, srv, "GET", "/", nil)
	tags, err := scanTags(page)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range cspProblems(tags) {
		t.Error(p)
	}

	// The page loads app.css and app.js, and everything it refers to is
	// served.
	var css, js bool
	for _, tg := range tags {
		switch {
		case tg.end:
		case tg.name == "link" && tg.attrs["rel"] == "stylesheet":
			css = css || tg.attrs["href"] == "/ui/app.css"
			checkServed(t, srv, tg.attrs["href"])
		case tg.name == "script":
			js = js || tg.attrs["src"] == "/ui/app.js"
			checkServed(t, srv, tg.attrs["src"])
		}
	}
	if !css || !js {
		t.Errorf("the page does not load /ui/app.css (%v) and /ui/app.js (%v)", css, js)
	}
}

func checkServed(t *testing.T, srv *httptest.Server, path string) {
	t.Helper()
	if !strings.HasPrefix(path, "/") || strings.HasPrefix(path, "//") {
		t.Errorf("%q is not a path of the server's own", path)
		return
	}
	if res, _ := uiGet(t, srv, "GET", path, nil); res.StatusCode != 200 {
		t.Errorf("GET %s (referred to by the page): %d", path, res.StatusCode)
	}
}

// TestUICSPProblems checks that cspProblems finds what the CSP refuses.
func TestUICSPProblems(t *testing.T) {
	t.Parallel()
	bad := `<!doctype html><!-- <script>in a comment</script> -->
<html><head><style>p { color: red }</style><script>alert(1)</script>
<script src="/ui/app.js">alert(2)</script><SCRIPT SRC=/x.js></SCRIPT></head>
<body ONLOAD="go()"><p style='color:red' data-x="a > b">x < y</p>
<a href=" JavaScript:go()">go</a><button onclick=go()>b</button><br/></body></html>`
	tags, err := scanTags(bad)
	if err != nil {
		t.Fatal(err)
	}
	problems := cspProblems(tags)
	for _, want := range []string{
		"<style> element", "inline <script>", "<script> with a body", "onload=", "style=", "javascript: URL", "onclick=",
	} {
		if !slicesContainsSub(problems, want) {
			t.Errorf("problems %q: none says %q", problems, want)
		}
	}
	if len(problems) != 7 {
		t.Errorf("%d problems, want 7: %q", len(problems), problems)
	}
	if _, err := scanTags(`<p class="x>`); err == nil {
		t.Error("an unclosed attribute value is not an error")
	}
}

func slicesContainsSub(ss []string, sub string) bool {
	for _, s := range ss {
		if strings.Contains(s, sub) {
			return true
		}
	}
	return false
}

// uiScripts returns the UI's JavaScript files (path under ui/ → text).
func uiScripts(t *testing.T) map[string]string {
	t.Helper()
	out := map[string]string{}
	err := filepath.WalkDir("ui", func(p string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() || filepath.Ext(p) != ".js" {
			return err
		}
		b, err := os.ReadFile(p)
		out[filepath.ToSlash(p)] = string(b)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(out) < 2 {
		t.Fatalf("ui/ has %d scripts", len(out))
	}
	return out
}

// TestUIScript checks the UI's scripts for what the CSP refuses or the
// brief forbids (tokens in localStorage, cookies or URLs, HTML strings)
// and for the one fetch wrapper, and that each is served.
func TestUIScript(t *testing.T) {
	t.Parallel()
	srv := newUIServer(t)
	_, page := uiGet(t, srv, "GET", "/", nil)
	scripts := uiScripts(t)
	fetches := 0
	for name, js := range scripts {
		if res, body := uiGet(t, srv, "GET", "/"+name, nil); res.StatusCode != 200 || body != js ||
			!strings.HasPrefix(res.Header.Get("Content-Type"), "text/javascript") {
			t.Errorf("GET /%s: %d %q, not the file", name, res.StatusCode, res.Header.Get("Content-Type"))
		}
		for _, re := range []string{
			`\beval\s*\(`, `\bnew\s+Function\b`, `\bFunction\s*\(`, `document\.cookie`,
			`javascript:`, `\.innerHTML\b`, `\.outerHTML\b`, `insertAdjacentHTML`, `document\.write`,
			`setAttribute\(\s*["'](style|on)`, `\.style\b`, `cssText`, `set(Timeout|Interval)\(\s*["'\x60]`,
			`[?&]token=`, `\bfetch\(\s*["'\x60]?https?:`,
		} {
			if loc := regexp.MustCompile(re).FindStringIndex(js); loc != nil {
				t.Errorf("%s has %q: %q", name, re, js[max(0, loc[0]-40):min(len(js), loc[1]+40)])
			}
		}
		// Local storage keeps the viewer's choices (time display,
		// theme) and nothing else: lib.js's two helpers, called with
		// those keys only; the token stays in session storage.
		for _, m := range regexp.MustCompile(`localStorage[^;]*`).FindAllString(js, -1) {
			if name != "ui/lib.js" || (m != "localStorage.getItem(key)" && m != "localStorage.setItem(key, value)") {
				t.Errorf("%s uses local storage: %q", name, m)
			}
		}
		for _, m := range regexp.MustCompile(`\b(stored|keep)\((\w+)`).FindAllStringSubmatch(js, -1) {
			if m[2] != "TIME_KEY" && m[2] != "THEME_KEY" && m[2] != "key" {
				t.Errorf("%s keeps %s in local storage", name, m[2])
			}
		}
		fetches += strings.Count(js, "fetch(")
		// Imports are relative, of the UI's own files.
		for _, m := range regexp.MustCompile(`(?m)^import .* from "([^"]+)";`).FindAllStringSubmatch(js, -1) {
			target := path.Join(path.Dir(name), m[1])
			if !strings.HasPrefix(m[1], ".") || scripts[target] == "" {
				t.Errorf("%s imports %q, not a file of ui/", name, m[1])
			}
		}
	}
	if fetches != 1 || !strings.Contains(scripts["ui/lib.js"], "fetch(") {
		t.Errorf("the scripts call fetch %d times, want once, in lib.js (every call goes through the wrapper)", fetches)
	}
	lib := scripts["ui/lib.js"]
	for _, s := range []string{`sessionStorage`, `"chime.token"`, `Authorization`, `"Bearer "`, `"Content-Type"`, `"application/json"`, `401`} {
		if !strings.Contains(lib, s) {
			t.Errorf("lib.js lacks %s", s)
		}
	}

	// Every element app.js and lib.js look up by id is in the page.
	tags, err := scanTags(page)
	if err != nil {
		t.Fatal(err)
	}
	ids := map[string]bool{}
	for _, tg := range tags {
		if id, ok := tg.attrs["id"]; ok {
			ids[id] = true
		}
	}
	for _, name := range []string{"ui/app.js", "ui/lib.js"} {
		for _, m := range regexp.MustCompile(`(?:\$|getElementById)\(\s*"([^"]+)"\s*\)`).FindAllStringSubmatch(scripts[name], -1) {
			if !ids[m[1]] {
				t.Errorf("%s looks up #%s, which the page lacks", name, m[1])
			}
		}
	}
	for _, id := range []string{"signin", "signin-form", "signin-token", "signin-error", "signout", "view", "error"} {
		if !ids[id] {
			t.Errorf("the page lacks #%s", id)
		}
	}
	for _, tg := range tags {
		if tg.attrs["id"] == "signin-token" && tg.attrs["type"] != "password" {
			t.Errorf("the token input is type=%q, want password", tg.attrs["type"])
		}
		if tg.name == "script" && !tg.end && tg.attrs["type"] != "module" {
			t.Errorf("<script src=%q> is not a module", tg.attrs["src"])
		}
	}
}

// TestUIPaths: every page path of the UI answers the page itself, so that
// a link to it can be shared and reloaded; other paths are 404, in JSON
// or, to a browser, with the page (which says so).
func TestUIPaths(t *testing.T) {
	t.Parallel()
	srv := newUIServer(t)
	_, want := uiGet(t, srv, "GET", "/", nil)
	for _, p := range api.UIPaths {
		p = strings.ReplaceAll(p, "{id}", "01ABC")
		res, body := uiGet(t, srv, "GET", p, nil)
		if res.StatusCode != 200 || body != want || !strings.HasPrefix(res.Header.Get("Content-Type"), "text/html") {
			t.Errorf("GET %s: %d %q, not the page", p, res.StatusCode, res.Header.Get("Content-Type"))
		}
	}
	for _, p := range []string{"/timer", "/timers/x/y", "/runs/x/y", "/nodes/x"} {
		if res, body := uiGet(t, srv, "GET", p, nil); res.StatusCode != 404 || !strings.Contains(body, `"no route for GET`) {
			t.Errorf("GET %s: %d %.100s, want 404 in JSON", p, res.StatusCode, body)
		}
		// A browser gets the page, which says it found nothing there.
		res, body := uiGet(t, srv, "GET", p, nil, "Accept", "text/html,application/xhtml+xml")
		if res.StatusCode != 404 || body != want || !strings.HasPrefix(res.Header.Get("Content-Type"), "text/html") {
			t.Errorf("GET %s from a browser: %d %q, want 404 with the page", p, res.StatusCode, res.Header.Get("Content-Type"))
		}
	}
	if res, body := uiGet(t, srv, "GET", "/api/v1/nothing", nil, "Accept", "text/html"); res.StatusCode != 404 || !strings.Contains(body, `"no route`) {
		t.Errorf("GET /api/v1/nothing from a browser: %d %.100s, want JSON", res.StatusCode, body)
	}
}

// TestUIScriptSyntax has node parse the scripts, when node is installed
// (the browser tests run them).
func TestUIScriptSyntax(t *testing.T) {
	t.Parallel()
	node, err := exec.LookPath("node")
	if err != nil {
		t.Skip("node is not installed")
	}
	for name := range uiScripts(t) {
		// As a module, from stdin: "node --check file.js" does not parse
		// a file's import syntax as a module (Node 20) and passes anything.
		f, err := os.Open(filepath.FromSlash(name))
		if err != nil {
			t.Fatal(err)
		}
		cmd := exec.Command(node, "--input-type=module", "--check")
		cmd.Stdin = f
		out, err := cmd.CombinedOutput()
		f.Close()
		if err != nil {
			t.Errorf("node --check %s: %v\n%s", name, err, out)
		}
	}
}

// TestUIAuthAnswers checks the answers the UI's fetch wrapper relies on:
// a 401 with WWW-Authenticate: Bearer and a message for the sign-in form,
// 200 with the token, and a 403 message for a token that may not write.
func TestUIAuthAnswers(t *testing.T) {
	t.Parallel()
	srv := newUIServer(t)
	errMessage := func(body string) string {
		var e struct {
			Error struct {
				Message string `json:"message"`
			} `json:"error"`
		}
		if err := json.Unmarshal([]byte(body), &e); err != nil {
			t.Errorf("error body %q: %v", body, err)
		}
		return e.Error.Message
	}

	res, body := uiGet(t, srv, "GET", "/api/v1/timers", nil)
	if res.StatusCode != 401 || !strings.HasPrefix(res.Header.Get("WWW-Authenticate"), "Bearer") || errMessage(body) == "" {
		t.Errorf("no token: %d %q %s", res.StatusCode, res.Header.Get("WWW-Authenticate"), body)
	}
	res, body = uiGet(t, srv, "GET", "/api/v1/timers", nil, "Authorization", "Bearer wrong")
	if res.StatusCode != 401 || errMessage(body) == "" {
		t.Errorf("wrong token: %d %s", res.StatusCode, body)
	}
	admin := []string{"Authorization", "Bearer " + uiAdminToken, "Content-Type", "application/json"}
	if res, body := uiGet(t, srv, "GET", "/api/v1/timers?limit=1000", nil, admin...); res.StatusCode != 200 {
		t.Errorf("admin token: %d %s", res.StatusCode, body)
	}

	res, body = uiGet(t, srv, "POST", "/api/v1/tokens", map[string]any{"name": "ui reader", "role": "read"}, admin...)
	if res.StatusCode != 201 {
		t.Fatalf("create read token: %d %s", res.StatusCode, body)
	}
	var tok struct {
		Token string `json:"token"`
	}
	if err := json.Unmarshal([]byte(body), &tok); err != nil || tok.Token == "" {
		t.Fatalf("create read token: %v %s", err, body)
	}
	res, body = uiGet(t, srv, "POST", "/api/v1/timers", map[string]any{"app": "a", "name": "n"},
		"Authorization", "Bearer "+tok.Token, "Content-Type", "application/json")
	if res.StatusCode != 403 || !strings.Contains(errMessage(body), "this token may not") {
		t.Errorf("read token writes: %d %s", res.StatusCode, body)
	}
}

// htmlTag is a start or end tag of an HTML document.
type htmlTag struct {
	name  string            // lower case
	end   bool              // an end tag
	attrs map[string]string // by lower-case name
	text  string            // the raw text of a <script> or <style> element
}

// scanTags returns the tags of doc, a small tokenizer that is enough for
// the UI's own page: comments and the doctype are skipped, attribute
// values may be quoted or bare, and script and style bodies are raw text.
func scanTags(doc string) ([]htmlTag, error) {
	var tags []htmlTag
	isSpace := func(c byte) bool { return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' }
	isName := func(c byte) bool {
		return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-'
	}
	i := 0
	for {
		j := strings.IndexByte(doc[i:], '<')
		if j < 0 {
			return tags, nil
		}
		i += j
		switch {
		case strings.HasPrefix(doc[i:], "<!--"):
			k := strings.Index(doc[i:], "-->")
			if k < 0 {
				return nil, errors.New("unclosed comment")
			}
			i += k + len("-->")
			continue
		case strings.HasPrefix(doc[i:], "<!"):
			k := strings.IndexByte(doc[i:], '>')
			if k < 0 {
				return nil, errors.New("unclosed <!")
			}
			i += k + 1
			continue
		}
		i++
		tag := htmlTag{attrs: map[string]string{}}
		if i < len(doc) && doc[i] == '/' {
			tag.end = true
			i++
		}
		n := i
		for n < len(doc) && isName(doc[n]) {
			n++
		}
		if n == i {
			continue // a '<' in text
		}
		tag.name = strings.ToLower(doc[i:n])
		i = n
		for {
			for i < len(doc) && (isSpace(doc[i]) || doc[i] == '/') {
				i++
			}
			if i >= len(doc) {
				return nil, errors.New("unclosed <" + tag.name)
			}
			if doc[i] == '>' {
				i++
				break
			}
			a := i
			for i < len(doc) && !isSpace(doc[i]) && doc[i] != '=' && doc[i] != '>' && doc[i] != '/' {
				i++
			}
			if i == a {
				i++ // a stray '='
				continue
			}
			name := strings.ToLower(doc[a:i])
			val := ""
			k := i
			for k < len(doc) && isSpace(doc[k]) {
				k++
			}
			if k < len(doc) && doc[k] == '=' {
				i = k + 1
				for i < len(doc) && isSpace(doc[i]) {
					i++
				}
				if i < len(doc) && (doc[i] == '"' || doc[i] == '\'') {
					e := strings.IndexByte(doc[i+1:], doc[i])
					if e < 0 {
						return nil, errors.New("unclosed value of " + name + " in <" + tag.name)
					}
					val = doc[i+1 : i+1+e]
					i += e + 2
				} else {
					v := i
					for i < len(doc) && !isSpace(doc[i]) && doc[i] != '>' {
						i++
					}
					val = doc[v:i]
				}
			}
			tag.attrs[name] = val
		}
		if !tag.end && (tag.name == "script" || tag.name == "style") {
			k := strings.Index(strings.ToLower(doc[i:]), "</"+tag.name)
			if k < 0 {
				return nil, errors.New("unclosed <" + tag.name + ">")
			}
			tag.text = doc[i : i+k]
			i += k
		}
		tags = append(tags, tag)
	}
}

// cspProblems lists what in tags the UI's Content-Security-Policy would
// refuse: inline scripts and styles, handler attributes, javascript: URLs.
func cspProblems(tags []htmlTag) []string {
	var out []string
	for _, tg := range tags {
		if tg.end {
			continue
		}
		switch tg.name {
		case "style":
			out = append(out, "a <style> element")
		case "script":
			if tg.attrs["src"] == "" {
				out = append(out, "an inline <script>")
			} else if strings.TrimSpace(tg.text) != "" {
				out = append(out, "a <script> with a body: "+tg.attrs["src"])
			}
		}
		for name, val := range tg.attrs {
			switch {
			case name == "style":
				out = append(out, "<"+tg.name+" style="+val+">")
			case strings.HasPrefix(name, "on"):
				out = append(out, "<"+tg.name+" "+name+"="+val+">")
			case strings.HasPrefix(strings.ToLower(strings.TrimSpace(val)), "javascript:"):
				out = append(out, "<"+tg.name+" "+name+"=...>: a javascript: URL")
			}
		}
	}
	return out
}

// TestUIDocs: docs/ui.md names every page path, and the screenshots it
// shows exist (TestUIBrowser -update-screenshots writes them).
func TestUIDocs(t *testing.T) {
	t.Parallel()
	b, err := os.ReadFile(filepath.Join("..", "..", "..", "docs", "ui.md"))
	if err != nil {
		t.Fatal(err)
	}
	doc := string(b)
	for _, p := range api.UIPaths {
		if !strings.Contains(doc, "`"+p+"`") {
			t.Errorf("docs/ui.md does not name the page %s", p)
		}
	}
	shots := regexp.MustCompile(`!\[[^\]]*\]\((ui/[^)]+\.png)\)`).FindAllStringSubmatch(doc, -1)
	if len(shots) < 8 {
		t.Errorf("docs/ui.md shows %d screenshots", len(shots))
	}
	for _, m := range shots {
		if _, err := os.Stat(filepath.Join("..", "..", "..", "docs", filepath.FromSlash(m[1]))); err != nil {
			t.Errorf("docs/ui.md shows %s: %v", m[1], err)
		}
	}
}

// TestUIRunAttempts checks that the run page shows what GET
// /api/v1/runs/{id} answers of the attempts (the timeline, the retry's
// instant, the last answer's HTTP status and headers, the run a rerun
// reruns), and, when node is installed, the lines it writes for them.
func TestUIRunAttempts(t *testing.T) {
	t.Parallel()
	js := uiScripts(t)["ui/pages/run.js"]
	for _, s := range []string{`r.attempts`, `r.next_attempt_at`, `r.http_status`, `r.response_headers`, `r.rerun_of`,
		`r.rerun_scheduled_at`, `"run-attempts"`, `"timeline"`} {
		if !strings.Contains(js, s) {
			t.Errorf("run.js does not use %s", s)
		}
	}
	if css, err := os.ReadFile(filepath.FromSlash("ui/app.css")); err != nil || !strings.Contains(string(css), ".timeline") {
		t.Errorf("app.css has no .timeline style (%v)", err)
	}
	node, err := exec.LookPath("node")
	if err != nil {
		t.Skip("node is not installed")
	}
	page, err := filepath.Abs(filepath.FromSlash("ui/pages/run.js"))
	if err != nil {
		t.Fatal(err)
	}
	// lib.js reads document.body at its start: a stub is enough for the
	// functions that build no elements.
	script := `globalThis.document = { body: { dataset: {} } };
const { attemptFacts, headerText } = await import(` + strconv.Quote("file://"+filepath.ToSlash(page)) + `);
console.log(attemptFacts({ attempt: 2, node: "n1", started_at: "2026-03-01T10:30:00Z", duration_ms: 1250, status: "failed", http_status: 503 }, "UTC"));
console.log(attemptFacts({ attempt: 3, node: "", started_at: "2026-03-01T10:31:00Z", duration_ms: 40, status: "succeeded" }, "UTC"));
console.log(JSON.stringify(headerText({ "X-Request-Id": "r1", "Content-Type": "text/plain", "Set-Cookie": "<redacted>" })));
console.log(JSON.stringify(headerText(undefined)));`
	cmd := exec.Command(node, "--input-type=module", "-e", script)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("node: %v\n%s", err, out)
	}
	want := strings.Join([]string{
		"#2 · on n1 · 2026-03-01 10:30:00 UTC · 1.3 s · HTTP 503",
		"#3 · 2026-03-01 10:31:00 UTC · 40 ms",
		`"Content-Type: text/plain\nSet-Cookie: <redacted>\nX-Request-Id: r1"`,
		`""`,
	}, "\n") + "\n"
	if string(out) != want {
		t.Errorf("run.js writes\n%s\nwant\n%s", out, want)
	}
}
