package apicheck

import (
	"go/ast"
	"go/doc"
	"go/parser"
	"go/token"
	"io/fs"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"testing"
	"unicode"
)

// public lists the packages the API promise covers (docs/stability.md),
// relative to the module root.
var public = []string{"verbs", "cq", "qp", "srq", "mr", "cm", "rpma", "rsocket", "uverbs"}

// plumbing names what once leaked from one goverbs package to its siblings
// through the public API and must not come back: "Type.Method", "Type.Field"
// or a package-level name. The general rules below catch most new leaks;
// this list pins the known ones.
var plumbing = map[string][]string{
	"verbs": {
		"Context.Track", "Context.Untrack", "Context.Object", "Context.Objects",
		"Context.FD", "Context.Do", "Context.Driver", "ObjectKind", "KindMW", "KindQP",
		"KindSRQ", "KindCQ", "KindCompChannel", "KindAH", "KindMR", "KindPD",
		"AHAttr.ABI", "CompChannel.Raw", "CompChannel.Stash", "CompChannel.Take",
		"PD.Check", "AH.Check", "AH.ProviderNum", "Window", "MWBind.Window",
	},
	"mr":  {"MW.Posted", "MW.HeldQP", "MW.Check", "MR.Check"},
	"srq": {"SRQ.Check"},
}

// getters lists the exported names with a Get prefix and the C function
// each mirrors (the rule: no Get on a getter, except where the name is
// that of the rdma-core or librpma function users search for).
var getters = map[string]string{
	"cm.ID.GetRequest":      "rdma_get_request",
	"cm.EP.GetRequest":      "rdma_get_request",
	"cm.GetAddrInfo":        "rdma_getaddrinfo",
	"cm.Queues.GetRecvComp": "rdma_get_recv_comp",
	"cm.Queues.GetSendComp": "rdma_get_send_comp",
	"rpma.CQ.GetWC":         "rpma_cq_get_wc",
	"rpma.CQ.GetCompletion": "rpma_cq_get_completion",
	"rpma.GetIBVContext":    "rpma_utils_get_ibv_context",
}

// initialisms are written in one case in exported names (Go style:
// QPN, not Qpn); a camel-case word equal to one of these spellings is
// drift.
var initialisms = []string{
	"Rd", "Qp", "Qpn", "Cq", "Srq", "Mr", "Mw", "Pd", "Ah", "Gid", "Guid", "Mtu",
	"Wr", "Wc", "Lid", "Psn", "Sge", "Rdma", "Ib", "Cm", "Ud", "Uc", "Rc", "Fd",
	"Abi", "Iova", "Rkey", "Lkey",
}

// pkg is one parsed public package.
type pkg struct {
	path  string
	doc   *doc.Package
	files []*ast.File
}

func load(t *testing.T) []pkg {
	t.Helper()
	var out []pkg
	for _, p := range public {
		dir := filepath.Join("..", "..", "..", p)
		fset := token.NewFileSet()
		pkgs, err := parser.ParseDir(fset, dir, func(fi fs.FileInfo) bool {
			return !strings.HasSuffix(fi.Name(), "_test.go")
		}, parser.ParseComments)
		if err != nil {
			t.Fatal(err)
		}
		ap, ok := pkgs[filepath.Base(p)]
		if !ok || len(pkgs) != 1 {
			t.Fatalf("%s: want one package %s, got %d", dir, p, len(pkgs))
		}
		var files []*ast.File
		names := make([]string, 0, len(ap.Files))
		for name := range ap.Files {
			names = append(names, name)
		}
		sort.Strings(names)
		for _, name := range names {
			files = append(files, ap.Files[name])
		}
		d, err := doc.NewFromFiles(fset, files, "github.com/goverbs/goverbs/"+p)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, pkg{path: p, doc: d, files: files})
	}
	return out
}

// exported returns every exported name of the package as "Name",
// "Type.Method" or "Type.Field" (fields of exported struct types only).
func exported(p pkg) []string {
	var names []string
	addValues := func(vs []*doc.Value) {
		for _, v := range vs {
			names = append(names, v.Names...)
		}
	}
	addValues(p.doc.Consts)
	addValues(p.doc.Vars)
	for _, f := range p.doc.Funcs {
		names = append(names, f.Name)
	}
	for _, typ := range p.doc.Types {
		names = append(names, typ.Name)
		addValues(typ.Consts)
		addValues(typ.Vars)
		for _, f := range typ.Funcs {
			names = append(names, f.Name)
		}
		for _, m := range typ.Methods {
			names = append(names, typ.Name+"."+m.Name)
		}
		for _, s := range typ.Decl.Specs {
			ts := s.(*ast.TypeSpec)
			switch tt := ts.Type.(type) {
			case *ast.StructType:
				for _, f := range tt.Fields.List {
					for _, n := range f.Names {
						if n.IsExported() {
							names = append(names, typ.Name+"."+n.Name)
						}
					}
				}
			case *ast.InterfaceType:
				for _, f := range tt.Methods.List {
					for _, n := range f.Names {
						names = append(names, typ.Name+"."+n.Name)
					}
				}
			}
		}
	}
	sort.Strings(names)
	return names
}

func TestNoPlumbing(t *testing.T) {
	for _, p := range load(t) {
		have := map[string]bool{}
		for _, n := range exported(p) {
			have[n] = true
		}
		for _, n := range plumbing[p.path] {
			if have[n] {
				t.Errorf("%s.%s is exported again: it is plumbing between goverbs' packages; keep it in internal/kobj", p.path, n)
			}
		}
	}
}

// TestNoInternalTypes fails when an exported declaration of a public
// package names a type of an internal package: a user could hold such a
// value but not name or document it, and it ties the API to internals.
func TestNoInternalTypes(t *testing.T) {
	for _, p := range load(t) {
		for _, f := range p.files {
			internal := map[string]string{} // local name -> import path
			for _, im := range f.Imports {
				path, _ := strconv.Unquote(im.Path.Value)
				if !strings.Contains(path, "/internal/") {
					continue
				}
				name := path[strings.LastIndex(path, "/")+1:]
				if im.Name != nil {
					name = im.Name.Name
				}
				internal[name] = path
			}
			if len(internal) == 0 {
				continue
			}
			check := func(where string, n ast.Node) {
				if n == nil {
					return
				}
				ast.Inspect(n, func(n ast.Node) bool {
					if sel, ok := n.(*ast.SelectorExpr); ok {
						if id, ok := sel.X.(*ast.Ident); ok && internal[id.Name] != "" {
							t.Errorf("%s: %s uses %s.%s (%s)", p.path, where, id.Name, sel.Sel.Name, internal[id.Name])
						}
					}
					return true
				})
			}
			for _, d := range f.Decls {
				switch d := d.(type) {
				case *ast.FuncDecl:
					if !d.Name.IsExported() {
						continue
					}
					if d.Recv != nil && !exportedRecv(d.Recv) {
						continue
					}
					check(d.Name.Name, d.Type)
				case *ast.GenDecl:
					for _, s := range d.Specs {
						switch s := s.(type) {
						case *ast.TypeSpec:
							if !s.Name.IsExported() {
								continue
							}
							if st, ok := s.Type.(*ast.StructType); ok {
								for _, fl := range st.Fields.List {
									if len(fl.Names) == 0 || fl.Names[0].IsExported() {
										check(s.Name.Name+" field", fl.Type)
									}
								}
								continue
							}
							check(s.Name.Name, s.Type)
						case *ast.ValueSpec:
							for i, n := range s.Names {
								if !n.IsExported() {
									continue
								}
								check(n.Name, s.Type)
								if i < len(s.Values) {
									check(n.Name, s.Values[i])
								}
							}
						}
					}
				}
			}
		}
	}
}

func exportedRecv(r *ast.FieldList) bool {
	typ := r.List[0].Type
	for {
		switch tt := typ.(type) {
		case *ast.StarExpr:
			typ = tt.X
		case *ast.IndexExpr:
			typ = tt.X
		case *ast.Ident:
			return tt.IsExported()
		default:
			return true
		}
	}
}

// TestClosers: whatever releases a resource is Close() error (io.Closer),
// not Delete, Free, Shutdown, Destroy or Release.
func TestClosers(t *testing.T) {
	for _, p := range load(t) {
		for _, typ := range p.doc.Types {
			for _, m := range typ.Methods {
				switch m.Name {
				case "Delete", "Free", "Shutdown", "Destroy", "Release", "Dealloc":
					t.Errorf("%s.%s.%s: name it Close() error, so it is an io.Closer", p.path, typ.Name, m.Name)
				case "Close":
					ft := m.Decl.Type
					if (ft.Params != nil && len(ft.Params.List) != 0) || ft.Results == nil || len(ft.Results.List) != 1 ||
						identName(ft.Results.List[0].Type) != "error" {
						t.Errorf("%s.%s.Close is not Close() error", p.path, typ.Name)
					}
				}
			}
		}
	}
}

func identName(e ast.Expr) string {
	if id, ok := e.(*ast.Ident); ok {
		return id.Name
	}
	return ""
}

func TestGetPrefix(t *testing.T) {
	seen := map[string]bool{}
	for _, p := range load(t) {
		if p.path == "uverbs" {
			continue // the kernel's struct names (ib_uverbs_get_context)
		}
		for _, n := range exported(p) {
			last := n[strings.LastIndex(n, ".")+1:]
			if !strings.HasPrefix(last, "Get") || len(last) == 3 || !unicode.IsUpper(rune(last[3])) {
				continue
			}
			full := p.path + "." + n
			seen[full] = true
			if getters[full] == "" {
				t.Errorf("%s: no Get prefix on getters; a Get name must mirror an rdma-core or librpma function (add it to getters with that function's name)", full)
			}
		}
	}
	for n := range getters {
		if !seen[n] {
			t.Errorf("getters lists %s, which does not exist any more", n)
		}
	}
}

func TestInitialisms(t *testing.T) {
	bad := map[string]bool{}
	for _, s := range initialisms {
		bad[s] = true
	}
	for _, p := range load(t) {
		if p.path == "uverbs" {
			continue // generated from the kernel's C names (Max_rd_atomic)
		}
		for _, n := range exported(p) {
			for _, part := range strings.Split(n, ".") {
				for _, w := range words(part) {
					if bad[w] {
						t.Errorf("%s.%s: write %q as %q", p.path, n, w, strings.ToUpper(w))
					}
				}
			}
		}
	}
}

// words splits a camel-case identifier: "MaxQPRDAtomic" is Max, QPRD,
// Atomic; "MaxQpRdAtom" is Max, Qp, Rd, Atom.
func words(s string) []string {
	var out []string
	rs := []rune(s)
	start := 0
	for i := 1; i < len(rs); i++ {
		lowerToUpper := unicode.IsLower(rs[i-1]) && unicode.IsUpper(rs[i])
		upperRun := i+1 < len(rs) && unicode.IsUpper(rs[i-1]) && unicode.IsUpper(rs[i]) && unicode.IsLower(rs[i+1])
		digit := unicode.IsDigit(rs[i]) != unicode.IsDigit(rs[i-1])
		if lowerToUpper || upperRun || digit {
			out = append(out, string(rs[start:i]))
			start = i
		}
	}
	return append(out, string(rs[start:]))
}

func TestWords(t *testing.T) {
	for in, want := range map[string]string{
		"MaxQPRDAtomic": "Max QPRD Atomic",
		"MaxQpRdAtom":   "Max Qp Rd Atom",
		"QPN":           "QPN",
		"GetWC":         "Get WC",
		"MWType2":       "MW Type 2",
	} {
		if got := strings.Join(words(in), " "); got != want {
			t.Errorf("words(%q) = %q, want %q", in, got, want)
		}
	}
}
