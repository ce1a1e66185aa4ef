package apicheck

import (
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// seamed are the packages that reach the providers only through the seam,
// package internal/provider (docs/providers.md): they hold no field and
// take no branch per provider. TestProviderSeam keeps it so.
var seamed = []string{"cq", "qp", "srq", "mr"}

// driverABI are the prefixes of the uverbs names generated from one
// driver's header (rdma_user_rxe.h, siw-abi.h, and the next providers'
// mlx5-abi.h, vmw_pvrdma-abi.h, ...): a provider's own ABI, which only
// its folder below internal/provider may use.
var driverABI = []string{
	"Rxe", "RXE_", "Siw", "SIW_", "Mlx5", "MLX5_", "Mlx4", "MLX4_", "Pvrdma", "PVRDMA_",
	"Efa", "EFA_", "Irdma", "IRDMA_", "Bnxt", "BNXT_", "Hns", "HNS_", "Erdma", "ERDMA_",
	"RDMA_DRIVER_",
}

// seamViolations returns what in the Go source src (a non-test file of a
// seamed package) names a provider: an import of a package below
// internal/provider (a provider, or the registry: only the seam itself
// is allowed), a verbs.Driver constant or the verbs.Driver type, a
// driver's uverbs ABI, or a comparison or switch on a Driver field.
func seamViolations(filename string, src any) ([]string, error) {
	fset := token.NewFileSet()
	f, err := parser.ParseFile(fset, filename, src, parser.SkipObjectResolution)
	if err != nil {
		return nil, err
	}
	var out []string
	report := func(n ast.Node, format string, args ...any) {
		out = append(out, fmt.Sprintf("%s: %s", fset.Position(n.Pos()), fmt.Sprintf(format, args...)))
	}
	// The names the file gives the verbs and uverbs packages.
	local := map[string]string{}
	for _, imp := range f.Imports {
		path, _ := strconv.Unquote(imp.Path.Value)
		if strings.HasPrefix(path, module+"/internal/provider/") {
			report(imp, "imports %s: a seamed package reaches providers only through %s/internal/provider", path, module)
		}
		name := filepath.Base(path)
		if imp.Name != nil {
			name = imp.Name.Name
		}
		if path == module+"/verbs" || path == module+"/uverbs" {
			local[name] = path
		}
	}
	isDriverField := func(e ast.Expr) bool {
		if c, ok := e.(*ast.CallExpr); ok { // x.Driver()
			e = c.Fun
		}
		s, ok := e.(*ast.SelectorExpr)
		return ok && s.Sel.Name == "Driver"
	}
	ast.Inspect(f, func(n ast.Node) bool {
		switch n := n.(type) {
		case *ast.SelectorExpr:
			id, ok := n.X.(*ast.Ident)
			if !ok {
				break
			}
			switch local[id.Name] {
			case module + "/verbs":
				if strings.HasPrefix(n.Sel.Name, "Driver") {
					report(n, "%s.%s: a seamed package does not name drivers", id.Name, n.Sel.Name)
				}
			case module + "/uverbs":
				for _, p := range driverABI {
					if strings.HasPrefix(n.Sel.Name, p) {
						report(n, "%s.%s: a driver's ABI belongs to its provider", id.Name, n.Sel.Name)
						break
					}
				}
			}
		case *ast.BinaryExpr:
			if (n.Op == token.EQL || n.Op == token.NEQ) && (isDriverField(n.X) || isDriverField(n.Y)) {
				report(n, "compares a driver id: a per-provider branch")
			}
		case *ast.SwitchStmt:
			if n.Tag != nil && isDriverField(n.Tag) {
				report(n, "switches on a driver id: a per-provider branch")
			}
		}
		return true
	})
	return out, nil
}

// The object packages call the providers through the seam only: no
// import of a provider, no driver named, no branch on a driver id.
func TestProviderSeam(t *testing.T) {
	for _, p := range seamed {
		dir := filepath.Join("..", "..", "..", p)
		files, err := filepath.Glob(filepath.Join(dir, "*.go"))
		if err != nil || len(files) == 0 {
			t.Fatalf("%s: no Go files (%v)", dir, err)
		}
		for _, file := range files {
			if strings.HasSuffix(file, "_test.go") {
				continue
			}
			src, err := os.ReadFile(file)
			if err != nil {
				t.Fatal(err)
			}
			v, err := seamViolations(file, src)
			if err != nil {
				t.Fatal(err)
			}
			for _, s := range v {
				t.Error(s)
			}
		}
	}
}

// The check finds each kind of per-provider code, and leaves the seam's
// own use (and the driver id every ioctl header carries) alone.
func TestProviderSeamCatches(t *testing.T) {
	const head = `package cq
import (
	"github.com/goverbs/goverbs/internal/kobj"
	"github.com/goverbs/goverbs/internal/provider"
	"github.com/goverbs/goverbs/uverbs"
	v "github.com/goverbs/goverbs/verbs"
)
`
	for name, body := range map[string]string{
		"provider import": `import _ "github.com/goverbs/goverbs/internal/provider/siw"`,
		"registry import": `import _ "github.com/goverbs/goverbs/internal/provider/registry"`,
		"Driver constant": `var isSIW = v.DriverSIW`,
		"Driver type":     `func f(c *v.Context) bool { return v.Driver(kobj.ContextOf(c).Driver) > 0 }`,
		"driver ABI":      `var resp uverbs.SiwUrespCreateCq`,
		"driver id":       `const id = uverbs.RDMA_DRIVER_RXE`,
		"comparison":      `func f(c *v.Context) bool { return kobj.ContextOf(c).Driver == 14 }`,
		"switch":          `func f(d v.Device) { switch d.Driver { } }`,
		"method switch":   `func f(c interface{ Driver() int }) { switch c.Driver() { } }`,
	} {
		src := head + body + "\nvar _ provider.CQ\nvar _ = uverbs.IB_UVERBS_QPT_RC\n"
		if name == "provider import" || name == "registry import" {
			src = strings.Replace(head, ")\n", ")\n"+body+"\n", 1) + "var _ provider.CQ\nvar _ uverbs.Ioctl\nvar _ v.SGE\nvar _ = kobj.ContextOf\n"
		}
		v, err := seamViolations(name+".go", src)
		if err != nil {
			t.Fatalf("%s: %v\n%s", name, err, src)
		}
		if len(v) == 0 {
			t.Errorf("%s: not caught:\n%s", name, src)
		}
	}
	clean := head + `
func create(c *v.Context, r *uverbs.Ioctl, ring provider.CQ) {
	r.Init("CQ.CREATE", uverbs.UVERBS_OBJECT_CQ, uverbs.UVERBS_METHOD_CQ_CREATE, kobj.ContextOf(c).Driver)
	ring.Udata().Add(r)
}
`
	if v, err := seamViolations("clean.go", clean); err != nil || len(v) != 0 {
		t.Errorf("the seam's own use was reported: %v %v", v, err)
	}
}
