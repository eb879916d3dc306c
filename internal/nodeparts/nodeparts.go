// Package nodeparts gives chime's own packages the parts of a chime.Node
// that the node's public API does not show: the store, engine and slice
// index that the server's REST API, the built-in handlers, the bench and
// the tests work on. Package chime imports this package and registers the
// accessor when it is initialised, so that this package need not import
// it.
package nodeparts

import (
	"github.com/chimehq/chime/internal/coord/index"
	"github.com/chimehq/chime/internal/engine"
	"github.com/chimehq/chime/internal/engine/action"
	"github.com/chimehq/chime/internal/metrics"
	"github.com/chimehq/chime/internal/store"
)

// Parts are the parts of a node that New assembled.
type Parts struct {
	// Store is the node's store, wrapped as every part of the node sees
	// it (TestConfig.WrapStore, the metrics' instrumentation). Writes that
	// bypass the node's Upsert must be followed by Engine.TimerSaved.
	Store store.Store
	// Engine is the node's engine.
	Engine *engine.Engine
	// Index is the node's slice index, for tools that drive a part of the
	// pipeline themselves (the bench times a planning pass over it).
	// Entries written to it bypass the store: the engine fires only runs
	// that the store holds as pending.
	Index index.Index
	// Secrets is the cache of the apps' signing secrets that signs the
	// node's callbacks and notification webhooks; a rotation made through
	// the node tells it (SecretCache.Rotating), so that the node signs
	// with the new secret from the commit on.
	Secrets *action.SecretCache
	// Series is the last hour of the node's fires and fire delays, per
	// minute, kept in memory (served by GET /api/v1/stats/series: see
	// api.Config.Series).
	Series *metrics.Series
}

var of func(node any) Parts

// Register sets the accessor of Of; package chime calls it once, when it
// is initialised.
func Register(f func(node any) Parts) { of = f }

// Of returns the parts of node, a *chime.Node. It panics on any other
// value.
func Of(node any) Parts { return of(node) }
