package kvexact

import (
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"testing"
)

// goStatusName is the Go name of a status macro: KVEXACT_OK is OK, KVEXACT_ERR_BUFFER_TOO_SMALL
// is ErrBufferTooSmall.
func goStatusName(macro string) string {
	rest := strings.TrimPrefix(macro, "KVEXACT_")
	if rest == "OK" {
		return "OK"
	}
	name := "Err"
	for _, w := range strings.Split(strings.TrimPrefix(rest, "ERR_"), "_") {
		name += w[:1] + strings.ToLower(w[1:])
	}
	return name
}

// headerStatuses lists the status macros include/kvexact.h defines.
func headerStatuses(t *testing.T) []string {
	root := os.Getenv("KVEXACT_ROOT")
	if root == "" {
		root = ".."
	}
	h, err := os.ReadFile(filepath.Join(root, "include", "kvexact.h"))
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, m := range regexp.MustCompile(`(?m)^#define (KVEXACT_(?:OK|ERR_[A-Z0-9_]+)) `).FindAllSubmatch(h, -1) {
		out = append(out, string(m[1]))
	}
	return out
}

// goStatusConstants maps each Go constant of the package (tests aside) whose value is a
// C.KVEXACT_OK or C.KVEXACT_ERR_* macro to that macro.
func goStatusConstants(t *testing.T) map[string]string {
	fset := token.NewFileSet()
	pkgs, err := parser.ParseDir(fset, ".", func(fi os.FileInfo) bool {
		return !strings.HasSuffix(fi.Name(), "_test.go")
	}, 0)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]string{}
	for _, pkg := range pkgs {
		for _, f := range pkg.Files {
			for _, d := range f.Decls {
				g, ok := d.(*ast.GenDecl)
				if !ok || g.Tok != token.CONST {
					continue
				}
				for _, s := range g.Specs {
					v := s.(*ast.ValueSpec)
					for i, val := range v.Values {
						sel, ok := val.(*ast.SelectorExpr)
						if !ok {
							continue
						}
						if x, ok := sel.X.(*ast.Ident); !ok || x.Name != "C" {
							continue
						}
						if m := sel.Sel.Name; m == "KVEXACT_OK" || strings.HasPrefix(m, "KVEXACT_ERR_") {
							out[v.Names[i].Name] = m
						}
					}
				}
			}
		}
	}
	return out
}

// Every status of the header is a Go Status constant named in Go style after it, and the Go
// side names no status the header lacks.
func TestEveryHeaderStatusIsAGoConstant(t *testing.T) {
	want := headerStatuses(t)
	if len(want) < 20 {
		t.Fatalf("found only %d status macros in the header: %v", len(want), want)
	}
	got := goStatusConstants(t)
	byMacro := map[string][]string{}
	for name, macro := range got {
		byMacro[macro] = append(byMacro[macro], name)
	}
	var missing []string
	for _, macro := range want {
		names := byMacro[macro]
		sort.Strings(names)
		if len(names) != 1 || names[0] != goStatusName(macro) {
			missing = append(missing, macro+" as "+goStatusName(macro)+" (found "+strings.Join(names, ", ")+")")
		}
		delete(byMacro, macro)
	}
	if len(missing) > 0 {
		t.Errorf("statuses without their Go constant:\n  %s", strings.Join(missing, "\n  "))
	}
	for macro, names := range byMacro {
		t.Errorf("Go constants %v name %s, which the header does not define", names, macro)
	}
}

func TestGoStatusName(t *testing.T) {
	for macro, name := range map[string]string{
		"KVEXACT_OK":                           "OK",
		"KVEXACT_ERR_BUFFER_TOO_SMALL":         "ErrBufferTooSmall",
		"KVEXACT_ERR_NONE_HASH_UNREPRODUCIBLE": "ErrNoneHashUnreproducible",
	} {
		if got := goStatusName(macro); got != name {
			t.Errorf("goStatusName(%s) = %s, want %s", macro, got, name)
		}
	}
}
