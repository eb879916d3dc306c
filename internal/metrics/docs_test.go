package metrics

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"go.yaml.in/yaml/v3"
)

// registered returns the name of every metric of Metrics, and whether it
// is a histogram, from the collectors of its fields.
func registered(t *testing.T) map[string]bool {
	t.Helper()
	m := New(nil)
	v := reflect.ValueOf(m).Elem()
	fqName := regexp.MustCompile(`fqName: "([^"]+)"`)
	names := map[string]bool{}
	for i := range v.NumField() {
		if _, series := v.Field(i).Interface().(*Series); series {
			continue // in memory for the web UI, not exported to Prometheus
		}
		c, ok := v.Field(i).Interface().(prometheus.Collector)
		if !ok {
			t.Fatalf("Metrics.%s is not a prometheus.Collector", v.Type().Field(i).Name)
		}
		_, hist := c.(prometheus.Histogram)
		_, histVec := c.(*prometheus.HistogramVec)
		ch := make(chan *prometheus.Desc, 4)
		c.Describe(ch)
		close(ch)
		for d := range ch {
			mt := fqName.FindStringSubmatch(d.String())
			if mt == nil {
				t.Fatalf("no name in %s", d)
			}
			names[mt[1]] = hist || histVec
		}
	}
	if len(names) < 15 {
		t.Fatalf("%d metrics found, want every field of Metrics", len(names))
	}
	return names
}

// TestObservabilityDocListsMetrics: docs/observability.md lists every
// metric of the package (as `name` in a table row). It may list metrics
// that other packages register, or that are not registered yet.
func TestObservabilityDocListsMetrics(t *testing.T) {
	t.Parallel()
	b, err := os.ReadFile(filepath.Join("..", "..", "docs", "observability.md"))
	if err != nil {
		t.Fatal(err)
	}
	rows := map[string]bool{}
	for _, l := range strings.Split(string(b), "\n") {
		if strings.HasPrefix(l, "| `") {
			name, _, _ := strings.Cut(strings.TrimPrefix(l, "| `"), "`")
			rows[name] = true
		}
	}
	for name := range registered(t) {
		if !rows[name] {
			t.Errorf("docs/observability.md has no table row for metric %s", name)
		}
	}
}

// exprs returns every PromQL expression of the alerting rules and the
// dashboard, with the alerts themselves.
func exprs(t *testing.T) (all []string, alerts []rule) {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("..", "..", "deploy", "prometheus", "alerts.yml"))
	if err != nil {
		t.Fatal(err)
	}
	var rf struct {
		Groups []struct {
			Name  string `yaml:"name"`
			Rules []rule `yaml:"rules"`
		} `yaml:"groups"`
	}
	if err := yaml.Unmarshal(b, &rf); err != nil {
		t.Fatalf("alerts.yml: %v", err)
	}
	for _, g := range rf.Groups {
		for _, r := range g.Rules {
			all = append(all, r.Expr)
			alerts = append(alerts, r)
		}
	}
	b, err = os.ReadFile(filepath.Join("..", "..", "deploy", "grafana", "chime.json"))
	if err != nil {
		t.Fatal(err)
	}
	var dash any
	if err := json.Unmarshal(b, &dash); err != nil {
		t.Fatalf("chime.json: %v", err)
	}
	var walk func(v any)
	walk = func(v any) {
		switch v := v.(type) {
		case map[string]any:
			if e, ok := v["expr"].(string); ok {
				all = append(all, e)
			}
			for _, c := range v {
				walk(c)
			}
		case []any:
			for _, c := range v {
				walk(c)
			}
		}
	}
	walk(dash)
	return all, alerts
}

type rule struct {
	Alert       string            `yaml:"alert"`
	Expr        string            `yaml:"expr"`
	For         string            `yaml:"for"`
	Labels      map[string]string `yaml:"labels"`
	Annotations map[string]string `yaml:"annotations"`
}

// TestAlertsAndDashboard: every chime_ metric that the alerting rules and
// the dashboard query is one of the package's (a histogram's _bucket,
// _sum and _count series included); every alert has a for, a severity, a
// summary, a description and a runbook that names a section of
// docs/observability.md; together they query the metrics of every signal
// that the alerts and the dashboard are for (fires, delay, pool, slices,
// store, clock, nodes).
func TestAlertsAndDashboard(t *testing.T) {
	t.Parallel()
	names := registered(t)
	all, alerts := exprs(t)
	if len(alerts) < 6 {
		t.Fatalf("%d alerts, want at least 6", len(alerts))
	}
	metric := regexp.MustCompile(`\bchime_[a-z0-9_]+`)
	used := map[string]bool{}
	for _, e := range all {
		for _, n := range metric.FindAllString(e, -1) {
			base := n
			for _, suffix := range []string{"_bucket", "_sum", "_count"} {
				if b, ok := strings.CutSuffix(n, suffix); ok && names[b] {
					base = b
				}
			}
			if _, ok := names[base]; !ok {
				t.Errorf("%q queries %s, which the metrics package does not define", e, n)
			}
			used[base] = true
		}
	}
	for _, want := range []string{"chime_fires_total", "chime_fire_delay_seconds", "chime_pool_running", "chime_slices_held",
		"chime_store_duration_seconds", "chime_store_errors_total", "chime_clock_skew_seconds", "chime_nodes_live"} {
		if !used[want] {
			t.Errorf("neither the alerts nor the dashboard query %s", want)
		}
	}

	doc, err := os.ReadFile(filepath.Join("..", "..", "docs", "observability.md"))
	if err != nil {
		t.Fatal(err)
	}
	anchors := map[string]bool{}
	for _, l := range strings.Split(string(doc), "\n") {
		if h, ok := strings.CutPrefix(l, "### "); ok {
			anchors[strings.ToLower(strings.ReplaceAll(strings.TrimSpace(h), " ", "-"))] = true
		}
	}
	for _, a := range alerts {
		if a.Alert == "" || a.For == "" || a.Labels["severity"] == "" ||
			a.Annotations["summary"] == "" || a.Annotations["description"] == "" {
			t.Errorf("alert %q lacks a name, for, severity, summary or description", a.Alert)
		}
		anchor, ok := strings.CutPrefix(a.Annotations["runbook"], "docs/observability.md#")
		if !ok || !anchors[anchor] {
			t.Errorf("alert %s: runbook %q is not a section of docs/observability.md", a.Alert, a.Annotations["runbook"])
		}
	}
}

// TestDashboardExprsParse: promtool accepts every expression of the
// dashboard (with Grafana's variables replaced), when it is installed.
func TestDashboardExprsParse(t *testing.T) {
	t.Parallel()
	promtool, err := exec.LookPath("promtool")
	if err != nil {
		t.Skip("promtool not installed (Debian package prometheus)")
	}
	all, _ := exprs(t)
	vars := strings.NewReplacer("$__rate_interval", "5m", "$job", "chime", "$instance", ".*")
	var b strings.Builder
	b.WriteString("groups:\n  - name: dashboard\n    rules:\n")
	sort.Strings(all)
	for i, e := range all {
		q, err := json.Marshal(vars.Replace(e)) // a JSON string is a YAML string
		if err != nil {
			t.Fatal(err)
		}
		b.WriteString("      - record: dashboard:expr_" + strconv.Itoa(i) + "\n        expr: " + string(q) + "\n")
	}
	f := filepath.Join(t.TempDir(), "exprs.yml")
	if err := os.WriteFile(f, []byte(b.String()), 0o600); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command(promtool, "check", "rules", f).CombinedOutput(); err != nil {
		t.Fatalf("promtool check rules: %v\n%s", err, out)
	}
}
