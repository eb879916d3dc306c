package action

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/chimehq/chime/model"
)

func TestHandlerRunnerDispatch(t *testing.T) {
	h := NewHandlerRunner("node-a")
	h.Register("echo", RunnerFunc(func(ctx context.Context, run *model.Run, tm *model.Timer) ([]byte, error) {
		return append([]byte(run.ID+":"), tm.Action.Handler.Args...), nil
	}))
	tm := &model.Timer{Action: model.Action{Type: model.ActionHandler,
		Handler: &model.HandlerAction{Name: "echo", Args: json.RawMessage(`{"x":1}`)}}}
	out, err := h.Run(context.Background(), &model.Run{ID: "r1"}, tm)
	if err != nil || string(out) != `r1:{"x":1}` {
		t.Fatalf("out %q err %v", out, err)
	}
	if !h.Exists("echo") || h.Exists("nope") {
		t.Fatal("Exists")
	}
	if n := h.Names(); len(n) != 1 || n[0] != "echo" {
		t.Fatalf("Names %v", n)
	}
	tm.Action.Handler.Name = "missing"
	_, err = h.Run(context.Background(), &model.Run{ID: "r1"}, tm)
	if err == nil || !strings.Contains(err.Error(), `no handler "missing" registered on node node-a`) {
		t.Fatalf("err %v", err)
	}
}
