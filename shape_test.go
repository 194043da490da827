package factory_test

import (
	"go/ast"
	"go/parser"
	"go/token"
	"os/exec"
	"strings"
	"testing"
)

// maxFunctionLines bounds every function's length, so that each stays one
// step a reader can hold (make lint bounds cyclomatic complexity with
// gocyclo the same way).
const maxFunctionLines = 80

// measuredFastPaths are functions written for speed, whose length is the
// price of a measured gain (BENCHMARKS.md): file:function.
var measuredFastPaths = map[string]bool{
	"internal/schema/fastcheck.go:valid":      true,
	"internal/schema/fastcheck.go:compile":    true,
	"internal/ingress/jsonvalid.go:validJSON": true,
}

func TestFunctionLength(t *testing.T) {
	out, err := exec.Command("git", "ls-files", "*.go").Output()
	if err != nil {
		t.Skipf("not a git checkout: %v", err)
	}
	fset := token.NewFileSet()
	for _, file := range strings.Fields(string(out)) {
		f, err := parser.ParseFile(fset, file, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		for _, d := range f.Decls {
			fd, ok := d.(*ast.FuncDecl)
			if !ok || fd.Body == nil || measuredFastPaths[file+":"+fd.Name.Name] {
				continue
			}
			if n := fset.Position(fd.End()).Line - fset.Position(fd.Pos()).Line + 1; n > maxFunctionLines {
				t.Errorf("%s: %s is %d lines long: at most %d (split it into named steps)", fset.Position(fd.Pos()), fd.Name.Name, n, maxFunctionLines)
			}
		}
	}
}
