package api_test

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/cdproto/cdp"
	"github.com/chromedp/cdproto/emulation"
	"github.com/chromedp/chromedp"
	"github.com/chromedp/chromedp/kb"

	"github.com/chimehq/chime"
	"github.com/chimehq/chime/internal/app/api"
	"github.com/chimehq/chime/internal/base/testenv"
	"github.com/chimehq/chime/internal/nodeparts"
	"github.com/chimehq/chime/internal/store"
	"github.com/chimehq/chime/model"
)

// The browser tests drive the web UI in a real headless Chromium (the
// Debian package chromium; scripts/test.sh installs it when missing)
// against a real node: SQLite store, engine, executor. One browser serves
// every subtest, which run in order on one tab; every wait is on a
// condition with a deadline.
//
// Without chromium they skip, unless CHIME_TEST_REQUIRE_BROWSER is set (as
// scripts/test.sh does), when they fail. Screenshots of each page go to
// $CHIME_UI_SCREENSHOTS, or a temporary directory; with
// -update-screenshots, to docs/ui/ (the ones docs/ui.md shows).

var updateScreenshots = flag.Bool("update-screenshots", false, "write the UI browser tests' screenshots into docs/ui/")

// browserWait bounds each step of a browser test.
const browserWait = 30 * time.Second

// chromiumPath finds the browser or skips (or fails, when required).
func chromiumPath(t *testing.T) string {
	t.Helper()
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	if os.Getenv("CHIME_TEST_REQUIRE_BROWSER") != "" {
		t.Fatal("chromium is not installed and CHIME_TEST_REQUIRE_BROWSER is set (apt-get install -y chromium)")
	}
	t.Skip("chromium is not installed (apt-get install -y chromium); set CHIME_TEST_REQUIRE_BROWSER to fail instead")
	return ""
}

// screenshotDir is where the tests write their screenshots.
func screenshotDir(t *testing.T) string {
	t.Helper()
	dir := os.Getenv("CHIME_UI_SCREENSHOTS")
	if *updateScreenshots {
		dir = filepath.Join("..", "..", "..", "docs", "ui")
	}
	if dir == "" {
		return t.TempDir()
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	return dir
}

// browser is one headless Chromium tab.
type browser struct {
	ctx  context.Context
	dir  string // of screenshots
	mu   sync.Mutex
	errs []string // exceptions thrown by the pages' scripts
}

func newBrowser(t *testing.T) *browser {
	t.Helper()
	opts := []chromedp.ExecAllocatorOption{
		chromedp.ExecPath(chromiumPath(t)),
		chromedp.Flag("headless", true),
		chromedp.NoSandbox,
		chromedp.DisableGPU,
		chromedp.Flag("disable-quic", true),
		chromedp.NoFirstRun,
		chromedp.NoDefaultBrowserCheck,
		chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true),
		chromedp.Flag("disable-extensions", true),
		chromedp.Flag("disable-dev-shm-usage", true),
		chromedp.UserDataDir(t.TempDir()),
		chromedp.WindowSize(1280, 900),
		chromedp.Env("TZ=Europe/London"), // the viewer's zone is not the timers'
	}
	actx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	ctx, cancel := chromedp.NewContext(actx)
	t.Cleanup(func() { cancel(); cancelAlloc() })
	b := &browser{ctx: ctx, dir: screenshotDir(t)}
	// The first call starts the browser and opens the tab: with no
	// deadline, which would stop the browser (see chromedp.Run).
	messages := chromedp.Console(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		for m, err := range messages {
			if err != nil {
				return
			}
			if m.IsException() {
				b.mu.Lock()
				b.errs = append(b.errs, m.String())
				b.mu.Unlock()
			}
		}
	}()
	t.Cleanup(func() { cancel(); <-done })
	t.Cleanup(func() {
		b.mu.Lock()
		defer b.mu.Unlock()
		for _, e := range b.errs {
			t.Errorf("a page's script threw: %s", e)
		}
	})
	return b
}

// run runs actions with a deadline, failing the test with what.
func (b *browser) run(t *testing.T, what string, steps ...chromedp.Action[chromedp.Void]) {
	t.Helper()
	ctx, cancel := context.WithTimeout(b.ctx, browserWait)
	defer cancel()
	if err := chromedp.Do(ctx, steps...); err != nil {
		ctx, cancel := context.WithTimeout(b.ctx, 5*time.Second)
		defer cancel()
		loc, _ := chromedp.Run(ctx, chromedp.Location())
		text, _ := chromedp.Run(ctx, chromedp.Evaluate[string](`document.body.innerText`))
		t.Fatalf("%s (at %s): %v\npage text:\n%.3000s", what, loc, err, text)
	}
}

// location returns the tab's URL.
func (b *browser) location(t *testing.T) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(b.ctx, browserWait)
	defer cancel()
	loc, err := chromedp.Run(ctx, chromedp.Location())
	if err != nil {
		t.Fatal(err)
	}
	return loc
}

// shot writes a PNG of the viewport as name.png.
func (b *browser) shot(t *testing.T, name string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(b.ctx, browserWait)
	defer cancel()
	if err := chromedp.Do(ctx, evalJS(`window.scrollTo(0, 0)`)); err != nil {
		t.Fatal(err)
	}
	png, err := chromedp.Run(ctx, chromedp.CaptureScreenshot())
	if err != nil {
		t.Fatalf("screenshot %s: %v", name, err)
	}
	if err := os.WriteFile(filepath.Join(b.dir, name+".png"), png, 0o644); err != nil {
		t.Fatal(err)
	}
}

// colorScheme emulates the system's light or dark setting.
func colorScheme(scheme string) chromedp.Action[chromedp.Void] {
	return chromedp.Func(func(ctx context.Context, t *chromedp.Target) error {
		_, err := cdp.Call(ctx, t, emulation.SetEmulatedMedia, emulation.SetEmulatedMediaParams{
			Features: []*emulation.MediaFeature{{Name: "prefers-color-scheme", Value: scheme}}})
		return err
	})
}

// waitJS waits until the expression is true.
func waitJS(expr string) chromedp.Action[chromedp.Void] {
	return chromedp.Poll[chromedp.Void](expr, chromedp.WithPollingInterval(50*time.Millisecond))
}

// evalJS runs statements in the page.
func evalJS(stmts string) chromedp.Action[chromedp.Void] {
	return chromedp.Func(func(ctx context.Context, t *chromedp.Target) error {
		_, err := chromedp.Evaluate[bool]("(() => { "+stmts+"; return true; })()")(ctx, t)
		return err
	})
}

// setInput sets an input's value and fires its input event, as typing
// does.
func setInput(sel, value string) chromedp.Action[chromedp.Void] {
	return evalJS(fmt.Sprintf(`const e = document.querySelector(%q); e.value = %q;
		e.dispatchEvent(new Event("input", {bubbles: true}))`, sel, value))
}

// setSelect sets a <select> and fires its change event, as choosing with
// the keyboard does.
func setSelect(sel, value string) chromedp.Action[chromedp.Void] {
	return evalJS(fmt.Sprintf(`const e = document.querySelector(%q); e.value = %q;
		e.dispatchEvent(new Event("change", {bubbles: true}))`, sel, value))
}

// uiNode is a real node with its API and UI served over HTTP.
type uiNode struct {
	node *chime.Node
	srv  *httptest.Server
}

func newUINode(t *testing.T, adminToken string) *uiNode {
	t.Helper()
	dir := t.TempDir()
	n, err := chime.New(chime.Config{DataDir: dir, DB: "sqlite://" + filepath.Join(dir, "chime.db"), Logger: discardLogger()})
	if err != nil {
		t.Fatal(err)
	}
	n.HandleFunc("echo", func(ctx context.Context, run *chime.Run) ([]byte, error) {
		return []byte(`{"greeting":"hello from the echo handler","n":1}`), nil
	})
	n.HandleFunc("fail", func(ctx context.Context, run *chime.Run) ([]byte, error) {
		return nil, errors.New("boom: the fail handler always fails")
	})
	if err := n.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		n.Shutdown(ctx)
	})
	srv := httptest.NewServer(api.New(api.Config{Store: nodeparts.Of(n).Store, Engine: nodeparts.Of(n).Engine, Clock: nodeparts.Of(n).Engine.Clock(),
		HandlerExists: n.HandlerExists, ValidateArgs: n.ValidateArgs, Logger: discardLogger(), AdminToken: adminToken,
		Series: nodeparts.Of(n).Series, NodeID: n.ID()}).Handler())
	t.Cleanup(srv.Close)
	return &uiNode{node: n, srv: srv}
}

// create makes a timer through the API (with token, if not empty).
func (u *uiNode) create(t testing.TB, token string, body map[string]any) *api.Timer {
	t.Helper()
	h := []string{"Content-Type", "application/json"}
	if token != "" {
		h = append(h, "Authorization", "Bearer "+token)
	}
	code, _, b := testenv.Call(t, u.srv.Client(), "POST", u.srv.URL+"/api/v1/timers", "", body, h...)
	if code != http.StatusCreated {
		t.Fatalf("create timer: %d %s", code, b)
	}
	var out api.Timer
	if err := json.Unmarshal(b, &out); err != nil {
		t.Fatal(err)
	}
	return &out
}

// waitRunStatus waits for a run of timer id with the status and returns it.
func (u *uiNode) waitRunStatus(t *testing.T, id string, status model.RunStatus) *model.Run {
	t.Helper()
	var found *model.Run
	testenv.Eventually(t, browserWait, "a "+string(status)+" run of "+id, func() (bool, string) {
		runs, _, err := nodeparts.Of(u.node).Store.ListRuns(context.Background(), store.RunFilter{TimerID: id, Status: status, Limit: 1})
		if err != nil {
			return false, err.Error()
		}
		if len(runs) == 0 {
			return false, "none yet"
		}
		found = runs[0]
		return true, ""
	})
	return found
}

func handlerTimer(app, name, schedule, handler string, enabled bool) map[string]any {
	return map[string]any{"app": app, "name": name, "schedule": schedule, "timezone": "America/New_York", "enabled": enabled,
		"action": map[string]any{"type": "handler", "handler": map[string]any{"name": handler}}}
}

func TestUIBrowser(t *testing.T) {
	b := newBrowser(t)
	u := newUINode(t, "")
	base := u.srv.URL
	var created string // the id of the timer made through the form

	t.Run("form creates a timer", func(t *testing.T) {
		b.run(t, "open the form",
			chromedp.Navigate(base+"/timers/new"),
			chromedp.WaitVisible(chromedp.CSS(`#f-app`)),
			chromedp.SendKeys(chromedp.CSS(`#f-app`), "shop"),
			chromedp.SendKeys(chromedp.CSS(`#f-name`), "nightly-report"),
			chromedp.SendKeys(chromedp.CSS(`#f-description`), "made through the form"),
			// The schedule is checked as it is typed.
			chromedp.SendKeys(chromedp.CSS(`#f-schedule`), "0 25 * * *"),
			waitJS(`document.querySelector("#f-schedule-error").textContent.includes("out of range")`),
		)
		b.shot(t, "form-error")
		b.run(t, "fix the schedule, see its next fires",
			setInput(`#f-schedule`, ""),
			chromedp.SendKeys(chromedp.CSS(`#f-schedule`), "@every 2s"),
			waitJS(`document.querySelectorAll("#schedule-preview li").length === 5 && document.querySelector("#f-schedule-error").textContent === ""`),
			setSelect(`#f-action-type`, "handler"),
			chromedp.WaitVisible(chromedp.CSS(`#f-action-handler-name`)),
			chromedp.SendKeys(chromedp.CSS(`#f-action-handler-name`), "echo"),
			chromedp.SendKeys(chromedp.CSS(`#f-action-handler-args`), `{"to": "ops"}`),
			// An error of the API shows next to its field.
			setInput(`#f-timeout`, "soon"),
			chromedp.Click(chromedp.CSS(`#form-submit`)),
			waitJS(`document.querySelector("#f-timeout-error").textContent.includes("Go duration")`),
		)
		b.shot(t, "form")
		b.run(t, "an unknown handler, beside its name; no shell on this server",
			waitJS(`[...document.querySelector("#f-action-type").options].map(o => o.value).join() === "http,handler"`),
			setInput(`#f-timeout`, "10s"),
			setInput(`#f-action-handler-name`, "nope"),
			chromedp.Click(chromedp.CSS(`#form-submit`)),
			waitJS(`document.querySelector("#f-action-handler-name-error").textContent.includes("no such handler") &&
				document.querySelector("#f-timeout-error").textContent === ""`),
			setInput(`#f-action-handler-name`, "echo"),
		)
		b.run(t, "submit",
			chromedp.Click(chromedp.CSS(`#form-submit`)),
			chromedp.WaitVisible(chromedp.CSS(`#timer-def`)),
			waitJS(`document.querySelector("#view h2").textContent === "shop / nightly-report"`),
		)
		loc := b.location(t)
		created = loc[strings.LastIndex(loc, "/")+1:]
		tm, err := nodeparts.Of(u.node).Store.GetTimer(context.Background(), created)
		if err != nil || tm.Action.Handler == nil || tm.Action.Handler.Name != "echo" || tm.Timeout != 10*time.Second ||
			tm.Description != "made through the form" {
			t.Fatalf("the timer made through the form: %+v, %v", tm, err)
		}
	})
	if created == "" {
		t.Fatal("no timer was made through the form")
	}

	t.Run("schedules in words", func(t *testing.T) {
		for _, tc := range []struct{ spec, zone, want string }{
			{"0 9 * * 1-5", "Europe/London", "at 09:00 on weekdays, Europe/London"},
			{"0 12 * * MON-FRI", "UTC", "at 12:00 on weekdays, UTC"},
			{"*/15 * * * *", "UTC", "every 15 minutes, UTC"},
			{"*/5 * * * * *", "UTC", "every 5 seconds, UTC"},
			{"@every 90s", "UTC", "every 90s"},
			{"@daily", "Asia/Tokyo", "at 00:00, Asia/Tokyo"},
			{"@hourly", "UTC", "every hour, UTC"},
			{"30 2 1 * *", "UTC", "at 02:30 on day 1 of the month, UTC"},
			{"0 0 13 * 5", "UTC", "at 00:00 on day 13 of the month or on Friday, UTC"},
			{"0 0 L * ?", "UTC", "at 00:00 on the last day of the month, UTC"},
			{"0 6 * 12 SAT,SUN", "UTC", "at 06:00 in December at weekends, UTC"},
			{"CRON_TZ=Asia/Tokyo 0 8 * * *", "UTC", "at 08:00, Asia/Tokyo"},
			{"0 30 9 * * * 2027", "UTC", ""}, // a year: only the spec is shown
			{"0 0 1W * *", "UTC", ""},
		} {
			ctx, cancel := context.WithTimeout(b.ctx, browserWait)
			got, err := chromedp.Run(ctx, chromedp.Evaluate[string](fmt.Sprintf(
				`import("/ui/lib.js").then(m => m.describeSchedule(%s, %s))`, jsString(tc.spec), jsString(tc.zone)), chromedp.EvalAwaitPromise))
			cancel()
			if err != nil || got != tc.want {
				t.Errorf("describeSchedule(%q, %q) = %q, %v; want %q", tc.spec, tc.zone, got, err, tc.want)
			}
		}
	})

	t.Run("list shows it", func(t *testing.T) {
		b.run(t, "list",
			chromedp.Navigate(base+"/timers"),
			waitJS(`[...document.querySelectorAll("#timers-rows tr")].some(r => r.dataset.id === `+jsString(created)+
				` && r.textContent.includes("nightly-report") && r.textContent.includes("every 2s") && r.textContent.includes("enabled"))`),
		)
	})

	t.Run("timer page shows its first run and disables it", func(t *testing.T) {
		b.run(t, "first run",
			chromedp.Click(chromedp.CSS(`#timers-rows a.timer-link`)),
			chromedp.WaitVisible(chromedp.CSS(`#timer-def`)),
			waitJS(`document.querySelectorAll("#timer-fires li").length === 10`),
			waitJS(`[...document.querySelectorAll("#runs-rows tr[data-status=succeeded]")].some(r => r.textContent.includes("hello from the echo handler"))`),
		)
		b.shot(t, "timer")
		b.run(t, "pause asks first, then records the fires skipped",
			chromedp.Click(chromedp.CSS(`#timer-pause`)),
			chromedp.WaitVisible(chromedp.CSS(`#confirm-yes`)),
			chromedp.Click(chromedp.CSS(`#confirm-yes`)),
			waitJS(`!!document.querySelector("#timer-paused") && !!document.querySelector("#timer-resume") && document.querySelector("#timer-enabled").textContent === "enabled"`),
			waitJS(`[...document.querySelectorAll("#runs-rows tr[data-status=skipped]")].some(r => r.textContent.includes("(paused)"))`),
		)
		if tm, err := nodeparts.Of(u.node).Store.GetTimer(context.Background(), created); err != nil || !tm.Paused || !tm.Enabled {
			t.Fatalf("after Pause: %+v, %v", tm, err)
		}
		b.run(t, "resume",
			chromedp.Click(chromedp.CSS(`#timer-resume`)),
			chromedp.WaitVisible(chromedp.CSS(`#confirm-yes`)),
			chromedp.Click(chromedp.CSS(`#confirm-yes`)),
			waitJS(`!document.querySelector("#timer-paused") && !!document.querySelector("#timer-pause")`),
			// No left-out part of the title shows as the text "null".
			waitJS(`!document.querySelector(".title").textContent.includes("null")`),
		)
		if tm, err := nodeparts.Of(u.node).Store.GetTimer(context.Background(), created); err != nil || tm.Paused {
			t.Fatalf("after Resume: %+v, %v", tm, err)
		}
		b.run(t, "disable",
			chromedp.Click(chromedp.CSS(`#timer-disable`)),
			waitJS(`document.querySelector("#timer-enabled").textContent === "disabled" && !!document.querySelector("#timer-enable")`),
		)
		tm, err := nodeparts.Of(u.node).Store.GetTimer(context.Background(), created)
		if err != nil || tm.Enabled {
			t.Fatalf("after Disable: enabled %v, %v", tm != nil && tm.Enabled, err)
		}
		b.run(t, "delete asks first",
			chromedp.Click(chromedp.CSS(`#timer-delete`)),
			chromedp.WaitVisible(chromedp.CSS(`#confirm-no`)),
			chromedp.Click(chromedp.CSS(`#confirm-no`)),
			chromedp.WaitVisible(chromedp.CSS(`#timer-delete`)),
		)
		b.run(t, "with the keyboard: Enter asks, Escape cancels",
			chromedp.Focus(chromedp.CSS(`#timer-trigger`)),
			chromedp.KeyEvent(kb.Enter),
			waitJS(`document.activeElement && document.activeElement.id === "confirm-yes"`),
			chromedp.KeyEvent(kb.Escape),
			waitJS(`!document.querySelector("#confirm-yes") && document.activeElement.id === "timer-trigger"`),
		)
		if _, err := nodeparts.Of(u.node).Store.GetTimer(context.Background(), created); err != nil {
			t.Fatalf("the timer after Delete was cancelled: %v", err)
		}
	})

	t.Run("search among 1000 timers", func(t *testing.T) {
		var wg sync.WaitGroup
		work := make(chan int)
		for range 4 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for i := range work {
					app := "fleet"
					if i%2 == 1 {
						app = "billing"
					}
					u.create(t, "", handlerTimer(app, fmt.Sprintf("job-%04d", i), "0 9 * * 1-5", "echo", i%100 == 0))
				}
			}()
		}
		for i := range 1000 {
			work <- i
		}
		close(work)
		wg.Wait()
		b.run(t, "search",
			chromedp.Navigate(base+"/timers"),
			waitJS(`document.querySelectorAll("#timers-rows tr[data-id]").length === 50 && !document.querySelector("#timers-next").disabled`),
			chromedp.SendKeys(chromedp.CSS(`#timers-search`), "JOB-0700"),
			// The next fire in the viewer's zone (Europe/London), then
			// the timer's; "no runs": its planned runs are not past runs.
			waitJS(`(() => { const rows = document.querySelectorAll("#timers-rows tr[data-id]");
				if (rows.length !== 1) return false;
				const r = rows[0], fire = r.children[4].children;
				return r.textContent.includes("job-0700") && r.textContent.includes("at 09:00 on weekdays, America/New_York") &&
					r.textContent.includes("enabled") && r.querySelector("td.last-run").textContent === "no runs" &&
					fire.length === 2 && !fire[0].textContent.includes(" 09:00:00 ") && / 09:00:00 E[SD]T$/.test(fire[1].textContent); })()`),
			waitJS(`location.search.includes("search=JOB-0700")`),
		)
		b.shot(t, "timers-search")
		b.run(t, "filter by app and enabled, page",
			setInput(`#timers-search`, ""),
			chromedp.SendKeys(chromedp.CSS(`#timers-app`), "billing\n"),
			chromedp.Click(chromedp.CSS(`#timers-tabs button[data-state=disabled]`)),
			waitJS(`(() => { const rows = [...document.querySelectorAll("#timers-rows tr[data-id]")];
				return rows.length === 50 && rows.every(r => r.children[2].textContent === "billing" && r.textContent.includes("disabled")); })()`),
			// The tabs count billing's timers: 500, all disabled.
			waitJS(`[...document.querySelectorAll("#timers-tabs button")].map(b => b.textContent).join() === "All500,Enabled0,Paused0,Disabled500,Failing0"`),
			chromedp.Click(chromedp.CSS(`#timers-next`)),
			waitJS(`document.querySelector("#timers-count").textContent.startsWith("page 2: 50 timers")`),
			waitJS(`[...document.querySelectorAll("#timers-rows td.last-run")].every(td => td.textContent === "no runs")`),
		)
		b.shot(t, "timers")
		b.run(t, "sort by next fire across every timer: the enabled ones first",
			setSelect(`#timers-app`, ""),
			chromedp.Click(chromedp.CSS(`#timers-tabs button[data-state=""]`)),
			setSelect(`#timers-sort`, "next_fire"),
			waitJS(`location.search.includes("sort=next_fire") && document.querySelector("#timers-count").textContent.startsWith("page 1: 50 timers")`),
			// 10 of the 1,000 are enabled; by id they are spread over 20
			// pages, by next fire they are the first 10 rows.
			waitJS(`(() => { const rows = [...document.querySelectorAll("#timers-rows tr[data-id]")];
				return rows.length === 50 && rows.slice(0, 10).every(r => r.textContent.includes("enabled") && r.textContent.includes("job-")) &&
					rows.slice(10).every(r => r.textContent.includes("disabled")); })()`),
		)
	})

	t.Run("failed run shows its error", func(t *testing.T) {
		tm := u.create(t, "", handlerTimer("shop", "always-fails", "@every 1h", "fail", true))
		code, _, body := testenv.Call(t, u.srv.Client(), "POST", u.srv.URL+"/api/v1/timers/"+tm.ID+"/trigger", "", nil)
		if code != http.StatusCreated {
			t.Fatalf("trigger: %d %s", code, body)
		}
		run := u.waitRunStatus(t, tm.ID, model.RunFailed)
		b.run(t, "open the failed run from its timer, filtering by status",
			chromedp.Navigate(base+"/timers/"+tm.ID),
			chromedp.WaitVisible(chromedp.CSS(`#runs-rows tr[data-status=failed] a.run-link`)),
			setSelect(`#runs-status`, "succeeded"),
			waitJS(`document.querySelector("#runs-rows").textContent === "No runs."`),
			setSelect(`#runs-status`, "failed"),
			chromedp.Click(chromedp.CSS(`#runs-rows tr[data-status=failed] a.run-link`)),
			waitJS(`location.pathname === "/runs/`+run.ID+`"`),
			waitJS(`document.querySelector("#run-error").textContent.includes("boom: the fail handler always fails")`),
			waitJS(`document.querySelector("#run-def").textContent.includes("failed") && document.querySelector("#run-request").textContent.includes('"fail"')`),
		)
		b.shot(t, "run")

		// An HTTP callback that answers 500: the run's error and the
		// JSON body pretty-printed, the request's secret header redacted.
		hook := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "application/json")
			w.Header().Set("X-Request-Id", "req-500")
			w.Header().Set("Set-Cookie", "session=c00kie-value")
			w.WriteHeader(http.StatusInternalServerError)
			w.Write([]byte(`{"error":"upstream down","retry":false}`))
		}))
		defer hook.Close()
		ht := u.create(t, "", map[string]any{"app": "shop", "name": "webhook-500", "schedule": "@every 1h",
			"action": map[string]any{"type": "http", "http": map[string]any{"method": "POST", "url": hook.URL + "/hook",
				"header": map[string]string{"Authorization": "Bearer s3cret-value", "X-Plain": "visible"}}}})
		if code, _, body := testenv.Call(t, u.srv.Client(), "POST", u.srv.URL+"/api/v1/timers/"+ht.ID+"/trigger", "", nil); code != http.StatusCreated {
			t.Fatalf("trigger: %d %s", code, body)
		}
		hrun := u.waitRunStatus(t, ht.ID, model.RunFailed)
		b.run(t, "the failed HTTP run, and the request it sent",
			chromedp.Navigate(base+"/runs/"+hrun.ID),
			waitJS(`document.querySelector("#run-error").textContent.includes("500")`),
			waitJS(`document.querySelector("#run-request").textContent.includes("<redacted>") &&
				document.querySelector("#run-request").textContent.includes("visible") && !document.body.textContent.includes("s3cret-value")`),
			// What was sent, not the action: the request line and chime's
			// own headers.
			waitJS(`(() => { const q = document.querySelector("#run-request").textContent;
				return q.startsWith("POST `+hook.URL+`/hook\n") && q.includes("X-Chime-Run-Id: `+hrun.ID+`") &&
					q.includes("X-Chime-Attempt: 1") && q.includes("Authorization: <redacted>") &&
					document.querySelector("#run-request-note").textContent.startsWith("What the last attempt sent"); })()`),
		)
		var apiRun api.Run
		if code, _, body := testenv.Call(t, u.srv.Client(), "GET", u.srv.URL+"/api/v1/runs/"+hrun.ID, "", nil); code != http.StatusOK {
			t.Fatalf("get run: %d %s", code, body)
		} else if err := json.Unmarshal(body, &apiRun); err != nil {
			t.Fatal(err)
		}
		if q := apiRun.Request; q == nil || q.Method != "POST" || q.URL != hook.URL+"/hook" || q.Header["Authorization"] != model.Redacted ||
			q.Header["X-Chime-Run-Id"] != hrun.ID || q.Header["X-Plain"] != "visible" {
			t.Errorf("GET /api/v1/runs/%s request = %+v", hrun.ID, apiRun.Request)
		}
		b.run(t, "its attempts as a timeline, the answer's status and headers",
			waitJS(`document.querySelector("#run-http-status")?.textContent === "500"`),
			waitJS(`(() => { const li = [...document.querySelectorAll("#run-attempts li[data-status=failed]")];
				return li.length > 0 && li.every((x) => x.textContent.includes("HTTP 500") && x.textContent.includes("http status 500")); })()`),
			waitJS(`(() => { const h = document.querySelector("#run-response-headers").textContent;
				return h.includes("X-Request-Id: req-500") && h.includes("Set-Cookie: <redacted>") && !document.body.textContent.includes("c00kie-value"); })()`),
		)
		b.run(t, "its JSON output pretty-printed",
			waitJS(`document.querySelector("#run-output").textContent.includes('{\n  "error": "upstream down",\n  "retry": false\n}')`),
		)
		b.shot(t, "run-http")
	})

	t.Run("runs of every timer: failed in the last hour in two clicks", func(t *testing.T) {
		tm := u.create(t, "", handlerTimer("billing", "charge", "@every 1h", "fail", true))
		if code, _, body := testenv.Call(t, u.srv.Client(), "POST", u.srv.URL+"/api/v1/timers/"+tm.ID+"/trigger", "", nil); code != http.StatusCreated {
			t.Fatalf("trigger: %d %s", code, body)
		}
		run := u.waitRunStatus(t, tm.ID, model.RunFailed)
		b.run(t, "Runs, then the failed tab",
			chromedp.Navigate(base+"/"),
			chromedp.Click(chromedp.CSS(`nav a[data-nav=runs]`)),
			waitJS(`location.pathname === "/runs" && document.querySelector("#runs-range").value === "1h"`),
			chromedp.Click(chromedp.CSS(`#runs-tab-failed`)),
			waitJS(`(() => { const rows = [...document.querySelectorAll("#runs-list tr[data-id]")];
				return location.search === "?status=failed" && document.querySelector("#runs-tab-failed").getAttribute("aria-selected") === "true" &&
					rows.length > 0 && rows.every(r => r.dataset.status === "failed") && rows.some(r => r.dataset.id === `+jsString(run.ID)+`); })()`),
			// The tabs count what they list.
			waitJS(`Number(document.querySelector("#runs-tab-failed .count").textContent) === document.querySelectorAll("#runs-list tr[data-id]").length &&
				Number(document.querySelector("#runs-tab-all .count").textContent) > Number(document.querySelector("#runs-tab-failed .count").textContent)`),
		)
		b.shot(t, "runs")
		b.run(t, "one app's, then the run",
			setSelect(`#runs-app`, "billing"),
			waitJS(`(() => { const rows = [...document.querySelectorAll("#runs-list tr[data-id]")];
				return location.search.includes("app=billing") && rows.length === 1 && rows[0].dataset.id === `+jsString(run.ID)+` &&
					rows[0].querySelector("a.timer-link").textContent === "billing/charge"; })()`),
			chromedp.Click(chromedp.CSS(`#runs-list a.run-link`)),
			waitJS(`location.pathname === "/runs/`+run.ID+`"`),
		)
		b.run(t, "none of another status in the range",
			chromedp.Navigate(base+"/runs?status=cancelled&range=15m"),
			waitJS(`document.querySelector("#runs-list").textContent === "No cancelled runs in the last 15 minutes."`),
		)
	})

	t.Run("a timer's history and upcoming fires", func(t *testing.T) {
		tm := u.create(t, "", handlerTimer("shop", "ticker", "@every 2s", "echo", true))
		u.waitRunStatus(t, tm.ID, model.RunSucceeded)
		b.run(t, "history, then upcoming",
			chromedp.Navigate(base+"/timers/"+tm.ID),
			waitJS(`document.querySelector("#runs-view").value === "history" &&
				[...document.querySelectorAll("#runs-rows tr[data-id]")].some(r => r.dataset.status === "succeeded") &&
				[...document.querySelectorAll("#runs-rows tr[data-id]")].every(r => r.dataset.status !== "pending" || r.textContent.includes("manual"))`),
			setSelect(`#runs-view`, "upcoming"),
			waitJS(`(() => { const rows = [...document.querySelectorAll("#runs-rows tr[data-id]")];
				const times = rows.map(r => r.dataset.id);
				return document.querySelector("#runs-status").hidden && rows.length > 0 && rows.every(r => r.dataset.status === "pending") &&
					times.join() === [...times].sort().join(); })()`),
			setSelect(`#runs-view`, "history"),
			waitJS(`!document.querySelector("#runs-status").hidden && [...document.querySelectorAll("#runs-rows tr[data-id]")].some(r => r.dataset.status === "succeeded")`),
		)
	})

	t.Run("timer actions: clock changes, trigger, backfill, edit", func(t *testing.T) {
		// Monthly in London: any ten months hold a clock change.
		tm := u.create(t, "", map[string]any{"app": "shop", "name": "monthly-close", "schedule": "0 9 1 * *",
			"timezone": "Europe/London", "action": map[string]any{"type": "handler", "handler": map[string]any{"name": "echo"}}})
		b.run(t, "clock changes",
			chromedp.Navigate(base+"/timers/"+tm.ID),
			waitJS(`document.querySelectorAll("#timer-fires li").length === 10`),
			waitJS(`[...document.querySelectorAll("#timer-fires li.dst")].some(li => /clock change: UTC\+0[01]:00 → UTC\+0[01]:00/.test(li.textContent))`),
			waitJS(`document.querySelector("#timer-def").textContent.includes("at 09:00 on day 1 of the month, Europe/London")`),
		)
		b.run(t, "trigger now, after a confirmation",
			chromedp.Click(chromedp.CSS(`#timer-trigger`)),
			chromedp.WaitVisible(chromedp.CSS(`#confirm-yes`)),
			chromedp.Click(chromedp.CSS(`#confirm-yes`)),
			waitJS(`[...document.querySelectorAll("#runs-rows tr[data-status=succeeded]")].some(r => r.textContent.includes("(manual)"))`),
		)
		// The browser's zone is Europe/London: the inputs are in it.
		london, err := time.LoadLocation("Europe/London")
		if err != nil {
			t.Fatal(err)
		}
		now := time.Now().In(london)
		b.run(t, "backfill, after a confirmation",
			setInput(`#backfill-from`, now.AddDate(0, -24, 0).Format("2006-01-02T15:04:05")),
			setInput(`#backfill-to`, now.Add(-time.Minute).Format("2006-01-02T15:04:05")),
			chromedp.Click(chromedp.CSS(`#backfill-form button`)),
			chromedp.WaitVisible(chromedp.CSS(`#confirm-yes`)),
			chromedp.Click(chromedp.CSS(`#confirm-yes`)),
			waitJS(`/Backfill: 2[45] runs queued/.test(document.querySelector("#timer-note").textContent)`),
		)
		b.run(t, "the runs' pages",
			waitJS(`document.querySelectorAll("#runs-rows tr[data-id]").length === 20 && !document.querySelector("#runs-older").disabled`),
			evalJS(`window.firstRun = document.querySelector("#runs-rows tr[data-id]").dataset.id`),
			chromedp.Click(chromedp.CSS(`#runs-older`)),
			waitJS(`(() => { const rows = document.querySelectorAll("#runs-rows tr[data-id]");
				return rows.length > 0 && rows.length <= 20 && rows[0].dataset.id !== window.firstRun && !document.querySelector("#runs-newest").disabled; })()`),
			chromedp.Click(chromedp.CSS(`#runs-newest`)),
			waitJS(`document.querySelector("#runs-rows tr[data-id]").dataset.id === window.firstRun`),
		)
		b.shot(t, "timer-actions")
		b.run(t, "edit",
			chromedp.Click(chromedp.CSS(`#timer-edit`)),
			waitJS(`document.querySelector("#f-schedule") && document.querySelector("#f-schedule").value === "0 9 1 * *" &&
				document.querySelector("#f-action-handler-name").value === "echo"`),
			setInput(`#f-description`, "edited in the browser"),
			setInput(`#f-policy-max_fires`, "12"),
			setInput(`#f-policy-jitter`, "30s"),
			setSelect(`#f-policy-dst`, "skip_gap"),
			setInput(`#f-history-keep`, "50"),
			chromedp.Click(chromedp.CSS(`#form-submit`)),
			waitJS(`location.pathname === "/timers/`+tm.ID+`" && document.querySelector("#timer-def") !== null &&
				document.querySelector("#timer-def").textContent.includes("edited in the browser") &&
				document.querySelector("#timer-def").textContent.includes("at most 12 fires") &&
				document.querySelector("#timer-def").textContent.includes("jitter 30s, daylight saving skip_gap") &&
				document.querySelector("#timer-def").textContent.includes("keeps the last 50 of finished runs, the server's default age")`),
		)
	})

	t.Run("nodes", func(t *testing.T) {
		b.run(t, "nodes",
			chromedp.Navigate(base+"/nodes"),
			waitJS(`document.querySelector("#nodes-rows tr[data-id="+CSS.escape(`+jsString(u.node.ID())+`)+"]") !== null`),
			waitJS(`document.querySelector("#nodes-rows tr[data-id="+CSS.escape(`+jsString(u.node.ID())+`)+"] td.pool").textContent.match(/^\d+ of [1-9]\d* running/) !== null`),
		)
		b.shot(t, "nodes")
	})

	t.Run("dashboard", func(t *testing.T) {
		b.run(t, "dashboard",
			chromedp.Navigate(base+"/"),
			waitJS(`document.querySelector("#dash-nodes") !== null && document.querySelector("#dash-nodes").textContent.includes("1")`),
			waitJS(`document.querySelectorAll("#dash-charts svg polyline").length === 4`),
			waitJS(`document.querySelector("#dash-failures .value").textContent !== "0"`),
			// The failing timer is listed first, a link to its page.
			waitJS(`(() => { const li = document.querySelector("#dash-trouble li");
				return li && li.textContent.includes("failing") && li.textContent.includes("shop / always-fails") && li.querySelector("a") !== null; })()`),
		)
		b.shot(t, "dashboard")
		b.run(t, "follow the failing timer's link",
			chromedp.Click(chromedp.CSS(`#dash-trouble li a`)),
			waitJS(`document.querySelector("#view h2") && document.querySelector("#view h2").textContent === "shop / always-fails"`),
		)
	})

	t.Run("phone and dark theme", func(t *testing.T) {
		defer b.run(t, "back to a laptop", chromedp.EmulateViewport(1280, 900), colorScheme("light"))
		noOverflow := waitJS(`document.documentElement.scrollWidth <= window.innerWidth`)
		b.run(t, "dashboard on a phone, dark",
			chromedp.EmulateViewport(390, 844, chromedp.EmulateMobile),
			colorScheme("dark"),
			chromedp.Navigate(base+"/"),
			waitJS(`document.querySelectorAll("#dash-charts svg polyline").length === 4`),
			waitJS(`getComputedStyle(document.body).backgroundColor === "rgb(17, 21, 26)"`),
			noOverflow,
		)
		b.shot(t, "dashboard-phone-dark")
		b.run(t, "a timer on a phone",
			chromedp.Navigate(base+"/timers/"+created),
			waitJS(`document.querySelectorAll("#timer-fires li").length > 0 && document.querySelectorAll("#runs-rows tr[data-id]").length > 0`),
			noOverflow,
		)
		b.shot(t, "timer-phone-dark")
		b.run(t, "the form on a phone",
			chromedp.Navigate(base+"/timers/new"),
			chromedp.WaitVisible(chromedp.CSS(`#f-app`)),
			noOverflow,
		)
	})

	t.Run("dependencies on the timer page", func(t *testing.T) {
		up := u.create(t, "", handlerTimer("flow", "extract", "@daily", "echo", true))
		downBody := handlerTimer("flow", "load", "", "echo", true)
		downBody["after"] = []map[string]any{{"timer": "flow/extract", "on": "success"}}
		down := u.create(t, "", downBody)
		b.run(t, "the downstream names its upstream, as a link",
			chromedp.Navigate(base+"/timers/"+down.ID),
			waitJS(`document.querySelector("#timer-upstreams a.dep-link") !== null &&
				document.querySelector("#timer-upstreams").textContent.includes("flow/extract on success") &&
				document.querySelector("#timer-fires").textContent.includes("runs after its upstreams")`),
			chromedp.Click(chromedp.CSS(`#timer-upstreams a.dep-link`)),
			waitJS(`location.pathname === "/timers/`+up.ID+`" && document.querySelector("#timer-downstreams") !== null &&
				document.querySelector("#timer-downstreams").textContent.includes("flow/load")`),
		)
		b.run(t, "a timer without dependencies has no such section",
			chromedp.Navigate(base+"/timers/"+created),
			chromedp.WaitVisible(chromedp.CSS(`#timer-def`)),
			waitJS(`document.querySelector("#timer-deps").hidden`),
		)
		b.run(t, "the form keeps after",
			chromedp.Navigate(base+"/timers/"+down.ID+"/edit"),
			chromedp.WaitVisible(chromedp.CSS(`#f-after`)),
			waitJS(`document.querySelector("#f-after").value === `+jsString(up.ID+" success")),
			setInput(`#f-after`, up.ID+" finish"),
			chromedp.Click(chromedp.CSS(`#form-submit`)),
			waitJS(`location.pathname === "/timers/`+down.ID+`" && document.querySelector("#timer-upstreams") !== null &&
				document.querySelector("#timer-upstreams").textContent.includes("on finish")`),
		)
		tm, err := nodeparts.Of(u.node).Store.GetTimer(context.Background(), down.ID)
		if err != nil || len(tm.After) != 1 || tm.After[0].Timer != up.ID || tm.After[0].On != model.OnFinish {
			t.Fatalf("after the form: %+v, %v", tm, err)
		}
	})

	t.Run("a token when auth is on", func(t *testing.T) {
		const admin = "browser-admin-token"
		secured := newUINode(t, admin)
		secured.create(t, admin, handlerTimer("vault", "secret-job", "@daily", "echo", false))
		b.run(t, "the prompt",
			chromedp.Navigate(secured.srv.URL+"/timers"),
			chromedp.WaitVisible(chromedp.CSS(`#signin-token`)),
			chromedp.SendKeys(chromedp.CSS(`#signin-token`), "wrong-token\n"),
			waitJS(`document.querySelector("#signin-error").textContent !== "" && !document.querySelector("#signin").hidden`),
		)
		b.shot(t, "signin")
		b.run(t, "sign in",
			chromedp.SendKeys(chromedp.CSS(`#signin-token`), admin+"\n"),
			waitJS(`document.querySelector("#signin").hidden && document.querySelector("#timers-rows") !== null &&
				document.querySelector("#timers-rows").textContent.includes("secret-job")`),
			waitJS(`sessionStorage.getItem("chime.token") === `+jsString(admin)),
			// A 401 brings the prompt back: a token the server no longer takes.
			evalJS(`sessionStorage.setItem("chime.token", "revoked")`),
			chromedp.Navigate(secured.srv.URL+"/nodes"),
			chromedp.WaitVisible(chromedp.CSS(`#signin-token`)),
			waitJS(`sessionStorage.getItem("chime.token") === null && !document.querySelector("#nodes-rows")`),
		)
		// A read token of one app: its timers; the dashboard says what
		// it may not see.
		code, _, body := testenv.Call(t, secured.srv.Client(), "POST", secured.srv.URL+"/api/v1/tokens", "",
			map[string]any{"name": "vault reader", "role": "read", "apps": []string{"vault"}},
			"Authorization", "Bearer "+admin, "Content-Type", "application/json")
		var tok struct {
			Token string `json:"token"`
		}
		if err := json.Unmarshal(body, &tok); code != http.StatusCreated || err != nil {
			t.Fatalf("create a scoped token: %d %v %s", code, err, body)
		}
		b.run(t, "an app's read token",
			chromedp.SendKeys(chromedp.CSS(`#signin-token`), tok.Token+"\n"),
			waitJS(`document.querySelector("#signin").hidden && document.querySelector("#error").textContent.includes("this token may not")`),
			chromedp.Click(chromedp.CSS(`nav a[data-nav=dashboard]`)),
			waitJS(`document.querySelector("#dash-cards").textContent.includes("may not read the cluster-wide data")`),
			chromedp.Click(chromedp.CSS(`#dash-cards a`)),
			waitJS(`document.querySelector("#timers-rows") !== null && document.querySelector("#timers-rows").textContent.includes("secret-job")`),
		)
	})
}

// jsString quotes s for a JavaScript expression.
func jsString(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}

// TestUIBrowserFinish: on a fresh node, the empty state that says how to
// make a first timer; the not-found pages; the theme and the time display
// chosen, kept across reloads; the timers page's state tabs and batch
// actions; the dashboard charts' axes and hover values; Run again….
func TestUIBrowserFinish(t *testing.T) {
	b := newBrowser(t)
	u := newUINode(t, "")
	base := u.srv.URL

	t.Run("empty state on a fresh install", func(t *testing.T) {
		b.run(t, "dashboard",
			chromedp.Navigate(base+"/"),
			chromedp.WaitVisible(chromedp.CSS(`#dash-empty #empty-state`)),
			waitJS(`document.querySelector("#empty-new").getAttribute("href") === "/timers/new" &&
				document.querySelector("#empty-cli").textContent.startsWith("chime timer create --app demo --name ping --schedule '@every 1m' --url ") &&
				document.querySelector("#empty-curl").textContent.startsWith("curl -s -X POST `+base+`/api/v1/timers -H 'Content-Type: application/json' -H \"Authorization: Bearer $CHIME_TOKEN\" -d '{")`),
		)
		b.shot(t, "empty")
		b.run(t, "timers page, then the form from its link",
			chromedp.Navigate(base+"/timers"),
			chromedp.WaitVisible(chromedp.CSS(`#timers-empty #empty-state`)),
			waitJS(`[...document.querySelectorAll("#timers-tabs button")].map(b => b.textContent).join() === "All0,Enabled0,Paused0,Disabled0,Failing0"`),
			chromedp.Click(chromedp.CSS(`#empty-new`)),
			waitJS(`location.pathname === "/timers/new" && document.querySelector("#f-app") !== null`),
		)
	})

	t.Run("not found", func(t *testing.T) {
		for _, tc := range []struct{ path, title, text string }{
			{"/nowhere/at/all", "Page not found", "There is no page at /nowhere/at/all."},
			{"/runs/01NOSUCHRUN", "Run not found", "There is no run 01NOSUCHRUN"},
			{"/timers/01NOSUCHTIMER", "Timer not found", "There is no timer 01NOSUCHTIMER"},
			{"/timers/01NOSUCHTIMER/edit", "Timer not found", "There is no timer 01NOSUCHTIMER"},
		} {
			b.run(t, tc.path,
				chromedp.Navigate(base+tc.path),
				chromedp.WaitVisible(chromedp.CSS(`#not-found`)),
				waitJS(`document.querySelector("#not-found h2").textContent === `+jsString(tc.title)+` &&
					document.querySelector("#not-found").textContent.includes(`+jsString(tc.text)+`) &&
					document.querySelector("#error").textContent === "" && !document.body.textContent.includes('"error"')`),
			)
		}
		b.shot(t, "not-found")
		b.run(t, "its links lead on",
			chromedp.Click(chromedp.CSS(`#not-found a[href="/timers"]`)),
			waitJS(`location.pathname === "/timers" && document.querySelector("#timers-rows") !== null`),
		)
	})

	t.Run("theme", func(t *testing.T) {
		defer b.run(t, "back to the system's light theme", colorScheme("light"), evalJS(`localStorage.removeItem("chime.theme")`))
		const dark, light = `"rgb(17, 21, 26)"`, `"rgb(247, 248, 250)"`
		bg := `getComputedStyle(document.body).backgroundColor === `
		b.run(t, "dark, kept across a reload",
			colorScheme("light"),
			chromedp.Navigate(base+"/nodes"),
			waitJS(bg+light+` && document.querySelector("#theme").value === "system"`),
			setSelect(`#theme`, "dark"),
			waitJS(bg+dark+` && document.documentElement.dataset.theme === "dark"`),
			chromedp.Navigate(base+"/nodes"),
			waitJS(`document.querySelector("#theme").value === "dark" && localStorage.getItem("chime.theme") === "dark"`),
			waitJS(bg+dark),
		)
		b.run(t, "light on a dark system, then the system's",
			colorScheme("dark"),
			setSelect(`#theme`, "light"),
			waitJS(bg+light),
			setSelect(`#theme`, "system"),
			waitJS(bg+dark),
		)
	})

	// Timers of each state: 3 that fire, 1 paused, 2 disabled, 1 failing.
	ids := map[string]string{}
	for _, name := range []string{"a-fires", "b-fires", "c-fires", "d-paused", "e-off", "f-off"} {
		ids[name] = u.create(t, "", handlerTimer("fleet", name, "@every 1h", "echo", !strings.HasSuffix(name, "-off"))).ID
	}
	ids["g-fails"] = u.create(t, "", handlerTimer("fleet", "g-fails", "@every 1h", "fail", true)).ID
	for _, call := range [][2]string{{"/pause", ids["d-paused"]}, {"/trigger", ids["g-fails"]}, {"/trigger", ids["a-fires"]}} {
		if code, _, body := testenv.Call(t, u.srv.Client(), "POST", base+"/api/v1/timers/"+call[1]+call[0], "", nil); code/100 != 2 {
			t.Fatalf("%s: %d %s", call[0], code, body)
		}
	}
	u.waitRunStatus(t, ids["g-fails"], model.RunFailed)
	done := u.waitRunStatus(t, ids["a-fires"], model.RunSucceeded)

	t.Run("state tabs and batch actions", func(t *testing.T) {
		tabText := `[...document.querySelectorAll("#timers-tabs button")].map(b => b.textContent).join()`
		rowNames := `[...document.querySelectorAll("#timers-rows tr[data-id] a.timer-link")].map(a => a.textContent).join()`
		b.run(t, "counts, and the failing tab",
			chromedp.Navigate(base+"/timers"),
			waitJS(tabText+` === "All7,Enabled4,Paused1,Disabled2,Failing1"`),
			waitJS(`document.querySelector("#timers-empty").children.length === 0`),
			chromedp.Click(chromedp.CSS(`#timers-tabs button[data-state=failing]`)),
			waitJS(rowNames+` === "g-fails" && location.search.includes("state=failing")`),
			chromedp.Click(chromedp.CSS(`#timers-tabs button[data-state=paused]`)),
			waitJS(rowNames+` === "d-paused" && document.querySelector("#timers-tabs button[aria-selected=true]").dataset.state === "paused"`),
			chromedp.Click(chromedp.CSS(`#timers-tabs button[data-state=enabled]`)),
			waitJS(rowNames+` === "a-fires,b-fires,c-fires,g-fails"`),
		)
		b.run(t, "select two, disable them",
			waitJS(`document.querySelector("#batch-disable").disabled`),
			chromedp.Click(chromedp.CSS(`#timers-rows tr[data-id="`+ids["a-fires"]+`"] input.pick`)),
			chromedp.Click(chromedp.CSS(`#timers-rows tr[data-id="`+ids["b-fires"]+`"] input.pick`)),
			waitJS(`document.querySelector("#batch-count").textContent === "2 selected" && !document.querySelector("#batch-disable").disabled &&
				document.querySelector("#timers-all").indeterminate`),
			chromedp.Click(chromedp.CSS(`#batch-disable`)),
			waitJS(`(() => { const li = [...document.querySelectorAll("#batch-results li")];
				return li.length === 2 && li[0].textContent === "fleet/a-fires: disabled" && li[1].textContent === "fleet/b-fires: disabled"; })()`),
			waitJS(tabText+` === "All7,Enabled2,Paused1,Disabled4,Failing1" && `+rowNames+` === "c-fires,g-fails"`),
		)
		b.shot(t, "timers-batch")
		for _, name := range []string{"a-fires", "b-fires"} {
			if tm, err := nodeparts.Of(u.node).Store.GetTimer(context.Background(), ids[name]); err != nil || tm.Enabled {
				t.Fatalf("%s after Disable: %+v, %v", name, tm, err)
			}
		}
		b.run(t, "select all: each timer's own result",
			chromedp.Click(chromedp.CSS(`#timers-tabs button[data-state=""]`)),
			waitJS(`document.querySelectorAll("#timers-rows tr[data-id]").length === 7`),
			chromedp.Click(chromedp.CSS(`#timers-all`)),
			waitJS(`document.querySelector("#batch-count").textContent === "7 selected" &&
				[...document.querySelectorAll("#timers-rows input.pick")].every(c => c.checked)`),
			chromedp.Click(chromedp.CSS(`#batch-resume`)),
			waitJS(`(() => { const li = [...document.querySelectorAll("#batch-results li")].map(l => l.textContent);
				return li.length === 7 && li.includes("fleet/d-paused: resumed") && li.includes("fleet/c-fires: already running (not paused)"); })()`),
			waitJS(tabText+` === "All7,Enabled3,Paused0,Disabled4,Failing1"`),
		)
		b.run(t, "Delete… asks first",
			chromedp.Click(chromedp.CSS(`#timers-rows tr[data-id="`+ids["f-off"]+`"] input.pick`)),
			chromedp.Click(chromedp.CSS(`#batch-delete`)),
			chromedp.WaitVisible(chromedp.CSS(`#confirm-no`)),
			chromedp.Click(chromedp.CSS(`#confirm-no`)),
			chromedp.WaitVisible(chromedp.CSS(`#batch-delete`)),
			chromedp.Click(chromedp.CSS(`#batch-delete`)),
			chromedp.Click(chromedp.CSS(`#confirm-yes`)),
			waitJS(`[...document.querySelectorAll("#batch-results li")].map(l => l.textContent).join() === "fleet/f-off: deleted"`),
			waitJS(tabText+` === "All6,Enabled3,Paused0,Disabled3,Failing1"`),
		)
	})

	t.Run("time display", func(t *testing.T) {
		defer b.run(t, "back to relative", evalJS(`localStorage.removeItem("chime.time")`))
		first := `document.querySelector("#run-def time.when")`
		b.run(t, "relative, the absolute time on hover",
			chromedp.Navigate(base+"/runs/"+done.ID),
			waitJS(`document.querySelector("#time-mode").value === "relative" && `+first+` !== null`),
			waitJS(`/^(\d+ (s|min|h|d)( \d+ (min|h))? ago|now)$/.test(`+first+`.textContent) &&
				/^\d{4}-\d\d-\d\d \d\d:\d\d:\d\d .+ · \d{4}-\d\d-\d\d \d\d:\d\d:\d\d UTC$/.test(`+first+`.title)`),
		)
		b.run(t, "UTC, kept across a reload",
			setSelect(`#time-mode`, "utc"),
			waitJS(first+` !== null && / \d\d:\d\d:\d\d UTC$/.test(`+first+`.textContent)`),
			chromedp.Navigate(base+"/runs/"+done.ID),
			waitJS(first+` !== null && / \d\d:\d\d:\d\d UTC$/.test(`+first+`.textContent) && document.querySelector("#time-mode").value === "utc"`),
		)
		b.run(t, "local: the viewer's zone (Europe/London)",
			setSelect(`#time-mode`, "local"),
			waitJS(first+` !== null && /^\d{4}-\d\d-\d\d \d\d:\d\d:\d\d (GMT|BST|GMT\+1)$/.test(`+first+`.textContent)`),
			chromedp.Navigate(base+"/timers"),
			waitJS(`document.querySelector("#timers-rows time.when") !== null && / (GMT|BST|GMT\+1)$/.test(document.querySelector("#timers-rows time.when").textContent) &&
				[...document.querySelectorAll("#timers-rows th, thead th")].some(th => th.textContent.startsWith("Next fire (Europe/London"))`),
		)
	})

	t.Run("chart axes and hover values", func(t *testing.T) {
		b.run(t, "axes",
			chromedp.Navigate(base+"/"),
			waitJS(`document.querySelectorAll("#dash-charts svg polyline").length === 4 && document.querySelector("#dash-empty").children.length === 0`),
			waitJS(`[...document.querySelectorAll("#dash-charts figure")].every(f =>
				f.querySelectorAll(".y-axis .tick").length === 3 && f.querySelector(".y-axis .tick:last-child").textContent === "0" &&
				f.querySelectorAll(".x-axis .tick").length === 5 && f.querySelector(".x-axis .tick:last-child").textContent === "now")`),
			// The failures chart's top is at least the one failure.
			waitJS(`Number(document.querySelector("#chart-failures .y-axis .tick").textContent) >= 1`),
		)
		b.run(t, "hover",
			evalJS(`const s = document.querySelector("#chart-failures svg"), r = s.getBoundingClientRect();
				s.parentElement.dispatchEvent(new PointerEvent("pointermove", {bubbles: true, clientX: r.right - 1, clientY: r.top + 10}))`),
			waitJS(`(() => { const tip = document.querySelector("#chart-failures .tip");
				return !tip.hidden && /^now: failed attempts \d+\.\d\d per minute$/.test(tip.textContent) &&
					document.querySelector("#chart-failures .guide").getAttribute("visibility") === "visible"; })()`),
		)
		b.shot(t, "dashboard-axes")
	})

	t.Run("run again", func(t *testing.T) {
		// POST /api/v1/runs/{id}/rerun answers the new run; where the
		// route is not served, the button and its question are checked.
		probe, _, _ := testenv.Call(t, u.srv.Client(), "POST", base+"/api/v1/runs/"+done.ID+"/rerun", "", nil)
		b.run(t, "asks first",
			chromedp.Navigate(base+"/runs/"+done.ID),
			chromedp.WaitVisible(chromedp.CSS(`#run-rerun`)),
			chromedp.Click(chromedp.CSS(`#run-rerun`)),
			chromedp.WaitVisible(chromedp.CSS(`#confirm-no`)),
			waitJS(`document.querySelector("[role=alertdialog]").textContent.startsWith("Run this again now?")`),
			chromedp.Click(chromedp.CSS(`#confirm-no`)),
			chromedp.WaitVisible(chromedp.CSS(`#run-rerun`)),
		)
		if probe == http.StatusNotFound || probe == http.StatusMethodNotAllowed {
			t.Logf("POST /api/v1/runs/{id}/rerun answers %d here: only the button and its question are tested", probe)
			return
		}
		b.run(t, "runs again and opens the new run",
			chromedp.Click(chromedp.CSS(`#run-rerun`)),
			chromedp.Click(chromedp.CSS(`#confirm-yes`)),
			waitJS(`location.pathname.startsWith("/runs/") && location.pathname !== "/runs/`+done.ID+`" && document.querySelector("#run-def") !== null`),
		)
	})
}
