package mlx5

import (
	"reflect"
	"strings"
	"testing"

	"github.com/goverbs/goverbs/uverbs"
)

// The provider's driver-data structs are the kernel's, field for field:
// each has the size of the struct package uverbs generates from
// rdma/mlx5-abi.h (make generate, the pinned UAPI headers), and each of
// its named fields the offset and size of the generated field of the same
// name (compared without case and underscores). Blank fields stand for
// what the provider does not use.
func TestABILayout(t *testing.T) {
	for _, c := range []struct {
		mine, kernel any
	}{
		{allocUcontextReq{}, uverbs.Mlx5IbAllocUcontextReqV2{}},
		{allocUcontextResp{}, uverbs.Mlx5IbAllocUcontextResp{}},
		{allocPDResp{}, uverbs.Mlx5IbAllocPdResp{}},
		{createAHResp{}, uverbs.Mlx5IbCreateAhResp{}},
		{createCQ{}, uverbs.Mlx5IbCreateCq{}},
		{createCQResp{}, uverbs.Mlx5IbCreateCqResp{}},
		{resizeCQ{}, uverbs.Mlx5IbResizeCq{}},
		{createSRQ{}, uverbs.Mlx5IbCreateSrq{}},
		{createSRQResp{}, uverbs.Mlx5IbCreateSrqResp{}},
		{createQP{}, uverbs.Mlx5IbCreateQp{}},
		{createQPResp{}, uverbs.Mlx5IbCreateQpResp{}},
	} {
		mine, kernel := reflect.TypeOf(c.mine), reflect.TypeOf(c.kernel)
		if mine.Size() != kernel.Size() {
			t.Errorf("%s: %d bytes, uverbs.%s %d", mine.Name(), mine.Size(), kernel.Name(), kernel.Size())
		}
		fields := map[string]reflect.StructField{}
		for i := 0; i < kernel.NumField(); i++ {
			f := kernel.Field(i)
			fields[norm(f.Name)] = f
		}
		for i := 0; i < mine.NumField(); i++ {
			f := mine.Field(i)
			if f.Name == "_" {
				continue
			}
			k, ok := fields[norm(f.Name)]
			switch {
			case !ok:
				t.Errorf("%s.%s: uverbs.%s has no such field", mine.Name(), f.Name, kernel.Name())
			case f.Offset != k.Offset || f.Type.Size() != k.Type.Size():
				t.Errorf("%s.%s: offset %d, %d bytes; uverbs.%s.%s: offset %d, %d bytes",
					mine.Name(), f.Name, f.Offset, f.Type.Size(), kernel.Name(), k.Name, k.Offset, k.Type.Size())
			}
		}
	}
}

func norm(s string) string { return strings.ToLower(strings.ReplaceAll(s, "_", "")) }
