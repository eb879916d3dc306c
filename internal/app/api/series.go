package api

import (
	"context"
	"net/http"
	"sync"
	"time"

	"github.com/chimehq/chime/internal/metrics"
	"github.com/chimehq/chime/internal/store"
)

// SeriesMaxAge is how old the other nodes' minutes that GET
// /api/v1/stats/series merges may be: the store's rows are read at most
// this often per node (a few hundred rows: the last hour of each node).
// The answering node's own minutes are always current.
const SeriesMaxAge = 5 * time.Second

// minutesCache keeps the store's dashboard minutes of the last hour, but
// the answering node's, for up to SeriesMaxAge.
type minutesCache struct {
	node string
	now  func() time.Time
	load func(ctx context.Context, since time.Time) ([]store.StatsMinute, error)

	mu   sync.Mutex
	rows []store.StatsMinute
	at   time.Time
}

// get returns the rows, reading them again when they are older than
// SeriesMaxAge. Concurrent calls wait for one read.
func (c *minutesCache) get(ctx context.Context) ([]store.StatsMinute, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	now := c.now()
	if !c.at.IsZero() && now.Sub(c.at) < SeriesMaxAge && !now.Before(c.at) {
		return c.rows, nil
	}
	rows, err := c.load(ctx, now.Truncate(time.Minute).Add(-metrics.SeriesMinutes*time.Minute))
	if err != nil {
		return nil, err
	}
	keep := rows[:0]
	for _, r := range rows {
		if c.node == "" || r.Node != c.node {
			keep = append(keep, r)
		}
	}
	c.rows, c.at = keep, now
	return keep, nil
}

// statsSeries answers GET /api/v1/stats/series: the cluster's last hour,
// the answering node's minutes from its memory, the others' from the
// store (each node writes its minutes about once a minute: see
// engine.StatsInterval).
func (s *clusterAPI) statsSeries(w http.ResponseWriter, r *http.Request) {
	rows, err := s.minutes.get(r.Context())
	if err != nil {
		s.serverError(w, r, err)
		return
	}
	now := s.now()
	pts := metrics.MergePoints(now, s.series, rows)
	out := StatsSeries{StepSeconds: 60, Points: make([]*SeriesPoint, len(pts))}
	for i, p := range pts {
		out.Points[i] = &SeriesPoint{Start: p.Start, Fires: p.Fires, Delays: p.Delays,
			DelayP50MS: float64(p.DelayP50) / float64(time.Millisecond), DelayP99MS: float64(p.DelayP99) / float64(time.Millisecond)}
	}
	out.Timers = []*TimerNote{}
	for _, n := range metrics.MergeTimers(now, s.series, rows, MaxSeriesTimers) {
		note := &TimerNote{TimerID: n.TimerID, Failures: n.Failures, Late: n.Late,
			MaxDelayMS: float64(n.MaxDelay) / float64(time.Millisecond)}
		if !n.LastFailure.IsZero() {
			at := n.LastFailure.UTC()
			note.LastFailure = &at
		}
		if !n.LastLate.IsZero() {
			at := n.LastLate.UTC()
			note.LastLate = &at
		}
		out.Timers = append(out.Timers, note)
	}
	writeJSON(w, http.StatusOK, out)
}
