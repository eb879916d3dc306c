package sim

import (
	"go/ast"
	"go/parser"
	"go/token"
	"reflect"
	"testing"

	"github.com/chimehq/chime/internal/store"
)

// TestStoreCoversInterface fails when store.Store has a method that
// faultStore does not wrap: its calls would bypass the faults.
func TestStoreCoversInterface(t *testing.T) {
	t.Parallel()
	f, err := parser.ParseFile(token.NewFileSet(), "store.go", nil, 0)
	if err != nil {
		t.Fatal(err)
	}
	wrapped := map[string]bool{"Close": true} // the engine never closes it
	for _, d := range f.Decls {
		if fd, ok := d.(*ast.FuncDecl); ok && fd.Recv != nil {
			wrapped[fd.Name.Name] = true
		}
	}
	it := reflect.TypeFor[store.Store]()
	for i := range it.NumMethod() {
		if m := it.Method(i).Name; !wrapped[m] {
			t.Errorf("faultStore does not wrap store.Store.%s (add it to internal/app/sim/store.go)", m)
		}
	}
}
