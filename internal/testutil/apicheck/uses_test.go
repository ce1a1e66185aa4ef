package apicheck

import (
	"go/ast"
	"go/parser"
	"go/token"
	"go/types"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strings"
	"testing"
)

const module = "github.com/goverbs/goverbs"

// unit is one package to type-check: a directory's package, its in-package
// test files included, or its external _test package.
type unit struct {
	dir   string // relative to the module root, slash-separated
	name  string
	files []*ast.File
	names []string // file paths, relative to the module root
}

type moduleSrc struct {
	fset  *token.FileSet
	prod  map[string]*unit // import path -> non-test files
	units []*unit
	pkgs  map[string]*types.Package
}

var versionSuffix = regexp.MustCompile(`^v[0-9]+$`)

// Import type-checks a package of the module from source (non-test
// files). Anything else (the standard library, x/sys) becomes an empty
// package: its uses do not type-check, which is fine here, since only
// references to goverbs' own declarations are looked at.
func (m *moduleSrc) Import(p string) (*types.Package, error) {
	if pkg, ok := m.pkgs[p]; ok {
		return pkg, nil
	}
	u, ok := m.prod[p]
	if !ok {
		name := path.Base(p)
		if versionSuffix.MatchString(name) {
			name = path.Base(path.Dir(p))
		}
		pkg := types.NewPackage(p, name)
		pkg.MarkComplete()
		m.pkgs[p] = pkg
		return pkg, nil
	}
	conf := types.Config{Importer: m, Error: func(error) {}}
	pkg, _ := conf.Check(p, m.fset, u.files, nil)
	m.pkgs[p] = pkg
	return pkg, nil
}

func loadModule(t *testing.T) *moduleSrc {
	t.Helper()
	root := filepath.Join("..", "..", "..")
	m := &moduleSrc{fset: token.NewFileSet(), prod: map[string]*unit{}, pkgs: map[string]*types.Package{}}
	byKey := map[string]*unit{}
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, p)
		rel = filepath.ToSlash(rel)
		if d.IsDir() {
			base := d.Name()
			if rel != "." && (strings.HasPrefix(base, ".") || strings.HasPrefix(base, "_") || base == "testdata") {
				return filepath.SkipDir
			}
			if rel != "." {
				if _, err := os.Stat(filepath.Join(p, "go.mod")); err == nil {
					return filepath.SkipDir // another module (bench/cgo)
				}
			}
			return nil
		}
		if !strings.HasSuffix(p, ".go") {
			return nil
		}
		f, err := parser.ParseFile(m.fset, p, nil, parser.ParseComments)
		if err != nil {
			return err
		}
		if ignored(f) {
			return nil
		}
		dir := path.Dir(rel)
		test := strings.HasSuffix(p, "_test.go")
		key := dir + " " + f.Name.Name
		if !test {
			key += " prod"
		}
		u := byKey[key]
		if u == nil {
			u = &unit{dir: dir, name: f.Name.Name}
			byKey[key] = u
		}
		u.files = append(u.files, f)
		u.names = append(u.names, rel)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	keys := make([]string, 0, len(byKey))
	for k := range byKey {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		u := byKey[k]
		if strings.HasSuffix(k, " prod") {
			m.prod[importPath(u.dir)] = u
			// The in-package test unit sees the production files too.
			if tu := byKey[u.dir+" "+u.name]; tu != nil {
				tu.files = append(tu.files, u.files...)
				tu.names = append(tu.names, u.names...)
				continue
			}
		}
		m.units = append(m.units, u)
	}
	return m
}

func importPath(dir string) string {
	if dir == "." {
		return module
	}
	return module + "/" + dir
}

// ignored reports a file kept out of every build (//go:build ignore, the
// cgo -godefs inputs).
func ignored(f *ast.File) bool {
	for _, cg := range f.Comments {
		if cg.Pos() > f.Package {
			break
		}
		for _, c := range cg.List {
			if strings.HasPrefix(c.Text, "//go:build") && strings.Contains(c.Text, "ignore") {
				return true
			}
		}
	}
	return false
}

// TestNoSiblingOnlyExports fails when an exported function or method of
// verbs is called by the code of the other goverbs packages (cq, qp, srq,
// mr, cm, rpma, internal/...) but by nothing that uses the public API as an
// application would: a test or example of any package, cmd/goverbs or
// bench/go. Such a function exists for goverbs' own packages: it belongs
// in internal/kobj, or it earns its place with an example. (Plumbing that
// tests also reach is caught by name in TestNoPlumbing.)
func TestNoSiblingOnlyExports(t *testing.T) {
	m := loadModule(t)
	verbsPath := module + "/verbs"
	sibling := map[string][]string{} // name -> sibling files using it
	public := map[string]bool{}
	for _, u := range m.units {
		info := &types.Info{Uses: map[*ast.Ident]types.Object{}}
		conf := types.Config{Importer: m, Error: func(error) {}}
		conf.Check(importPath(u.dir), m.fset, u.files, info)
		for id, obj := range info.Uses {
			if obj.Pkg() == nil || obj.Pkg().Path() != verbsPath || !obj.Exported() {
				continue
			}
			name := qualified(obj)
			if name == "" {
				continue
			}
			file := filepath.ToSlash(m.fset.Position(id.Pos()).Filename)
			rel := file[strings.Index(file, "../../../")+len("../../../"):]
			switch {
			case strings.HasPrefix(rel, "internal/testutil/"),
				strings.HasPrefix(rel, "verbs/") && !strings.HasSuffix(rel, "_test.go"):
				// verbs itself and the test helpers show nothing
			case strings.HasSuffix(rel, "_test.go"), strings.HasPrefix(rel, "cmd/"), strings.HasPrefix(rel, "bench/"),
				strings.HasPrefix(rel, "internal/tools/"), strings.HasPrefix(rel, "examples/"):
				// the tools and examples are programs: what they use, a user's program can
				public[name] = true
			default:
				sibling[name] = append(sibling[name], rel)
			}
		}
	}
	if len(sibling) == 0 {
		t.Fatal("found no use of verbs in the other packages: the loader is broken")
	}
	var bad []string
	for name, files := range sibling {
		if !public[name] {
			sort.Strings(files)
			bad = append(bad, name+" (used in "+strings.Join(slices.Compact(files), ", ")+")")
		}
	}
	sort.Strings(bad)
	for _, b := range bad {
		t.Errorf("verbs.%s: exported for goverbs' own packages only; move it to internal/kobj or show it in an example", b)
	}
}

// qualified names a function or method of verbs as "Name" or
// "Type.Method". Everything else is left out (""): types, constants,
// variables and fields are the vocabulary the packages share with
// applications (error sentinels, opcodes, work requests); what exists for
// goverbs' own packages alone is behaviour.
func qualified(obj types.Object) string {
	switch o := obj.(type) {
	case *types.Func:
		sig, _ := o.Type().(*types.Signature)
		if sig == nil || sig.Recv() == nil {
			return o.Name()
		}
		rt := sig.Recv().Type()
		if p, ok := rt.(*types.Pointer); ok {
			rt = p.Elem()
		}
		if n, ok := rt.(*types.Named); ok {
			return n.Obj().Name() + "." + o.Name()
		}
		return ""
	}
	return ""
}
