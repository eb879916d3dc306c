package api

import (
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/chimehq/chime/internal/metrics"
	"github.com/chimehq/chime/internal/timers"
	"github.com/chimehq/chime/model"
	"github.com/chimehq/chime/schedule"
)

// clusterAPI serves what the cluster and its nodes report (GET
// /api/v1/nodes, /stats, /stats/series: misc.go, series.go) and what a
// client asks of the node before it saves a timer (GET
// /api/v1/schedule/next, /action-types).
type clusterAPI struct {
	*env
	engine  Engine
	counts  *statsCache   // of GET /api/v1/stats
	minutes *minutesCache // of GET /api/v1/stats/series
	series  *metrics.Series
	shell   bool // shell actions allowed
}

// MaxScheduleN is the largest n of GET /api/v1/schedule/next.
const MaxScheduleN = 1000

// scheduleNext previews a schedule: GET /api/v1/schedule/next?spec=&tz=&n=&from=&dst=.
func (s *clusterAPI) scheduleNext(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	spec := q.Get("spec")
	if strings.TrimSpace(spec) == "" {
		writeError(w, http.StatusBadRequest, "spec", "is required")
		return
	}
	loc, err := timers.LoadLocation(q.Get("tz"))
	if err != nil {
		writeError(w, http.StatusBadRequest, "tz", err.Error())
		return
	}
	n := 5
	if v := q.Get("n"); v != "" {
		n, err = strconv.Atoi(v)
		if err != nil || n < 1 || n > MaxScheduleN {
			writeError(w, http.StatusBadRequest, "n", "must be a whole number from 1 to "+strconv.Itoa(MaxScheduleN))
			return
		}
	}
	from := s.now()
	if v := q.Get("from"); v != "" {
		from, err = time.Parse(time.RFC3339Nano, v)
		if err != nil {
			writeError(w, http.StatusBadRequest, "from", "must be an RFC 3339 time such as 2026-01-02T15:04:05Z")
			return
		}
	}
	dst, err := schedule.ParseDST(q.Get("dst"))
	if err != nil {
		writeError(w, http.StatusBadRequest, "dst", "must be one of "+strings.Join(schedule.DSTNames(), ", ")+", got "+strconv.Quote(q.Get("dst")))
		return
	}
	times, err := timers.Preview(spec, loc, dst, from, n)
	if err != nil {
		writeError(w, http.StatusBadRequest, "spec", err.Error())
		return
	}
	out := ScheduleTimes{Times: []string{}}
	for _, t := range times {
		out.Times = append(out.Times, t.In(loc).Format(time.RFC3339Nano))
	}
	writeJSON(w, http.StatusOK, out)
}

// stats answers GET /api/v1/stats: the store's counts, at most
// Config.StatsMaxAge old (statsCache), and this node's pool.
func (s *clusterAPI) stats(w http.ResponseWriter, r *http.Request) {
	st, err := s.counts.get(r.Context())
	if err != nil {
		s.serverError(w, r, err)
		return
	}
	running, capacity := s.engine.PoolStats()
	out := Stats{
		Timers: TimerStats{
			Total:    st.TimersEnabled + st.TimersDisabled,
			Enabled:  st.TimersEnabled,
			Disabled: st.TimersDisabled,
		},
		Runs: map[string]int64{},
		Pool: PoolStats{InUse: running, Capacity: capacity},
	}
	for _, status := range model.RunStatuses {
		out.Runs[string(status)] = st.Runs[status]
	}
	writeJSON(w, http.StatusOK, out)
}

// actionTypes answers GET /api/v1/action-types (the web UI's form offers
// these).
func (s *clusterAPI) actionTypes(w http.ResponseWriter, r *http.Request) {
	out := ActionTypes{Types: []string{model.ActionHTTP, model.ActionHandler}}
	if s.shell {
		out.Types = append(out.Types, model.ActionShell)
	}
	writeJSON(w, http.StatusOK, out)
}

// MaxSeriesTimers is the most timers GET /api/v1/stats/series lists.
const MaxSeriesTimers = 20

func (s *clusterAPI) nodes(w http.ResponseWriter, r *http.Request) {
	nodes, err := s.engine.Nodes(r.Context())
	if err != nil {
		s.serverError(w, r, err)
		return
	}
	out := NodeList{Nodes: make([]*Node, 0, len(nodes))}
	for _, n := range nodes {
		slices := n.Slices
		if slices == nil {
			slices = []string{}
		}
		handlers := n.Handlers
		if handlers == nil {
			handlers = []string{}
		}
		out.Nodes = append(out.Nodes, &Node{ID: n.ID, Addr: n.Addr, StartedAt: n.StartedAt.UTC(),
			SeenAt: n.SeenAt.UTC(), Slices: slices, Pool: PoolStats{InUse: n.PoolInUse, Capacity: n.PoolCapacity},
			Handlers: handlers, ClaimMode: n.ClaimMode, Coordination: n.Coordination})
	}
	writeJSON(w, http.StatusOK, out)
}
