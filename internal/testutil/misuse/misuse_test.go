package misuse_test

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/goverbs/goverbs/cm"
	"github.com/goverbs/goverbs/cq"
	"github.com/goverbs/goverbs/internal/testutil"
	"github.com/goverbs/goverbs/mr"
	"github.com/goverbs/goverbs/qp"
	"github.com/goverbs/goverbs/rpma"
	"github.com/goverbs/goverbs/srq"
	"github.com/goverbs/goverbs/verbs"
)

// callBound is how long one call may take before the matrix calls it a
// hang. Nothing here waits for the fabric: every context argument carries
// a deadline of ctxBound, and a call on a closed object must fail at once.
const (
	callBound = 30 * time.Second
	ctxBound  = 2 * time.Second
)

// outcome is what one method call did.
type outcome struct {
	method string
	err    error // the last result, when it is an error
	hasErr bool  // the method returns an error
	panic  any
	hung   bool
}

var errorType = reflect.TypeOf((*error)(nil)).Elem()
var contextType = reflect.TypeOf((*context.Context)(nil)).Elem()

// zeroArgs builds the arguments of m: zero values, except contexts, which
// get a deadline so that a wait cannot outlive the test.
func zeroArgs(m reflect.Method) ([]reflect.Value, context.CancelFunc) {
	ctx, cancel := context.WithTimeout(context.Background(), ctxBound)
	var args []reflect.Value
	for i := 1; i < m.Type.NumIn(); i++ { // 0 is the receiver
		in := m.Type.In(i)
		if in == contextType {
			args = append(args, reflect.ValueOf(ctx))
			continue
		}
		if m.Type.IsVariadic() && i == m.Type.NumIn()-1 {
			break
		}
		args = append(args, reflect.Zero(in))
	}
	return args, cancel
}

// call invokes the method with zero arguments on its own goroutine and
// reports what it did; a call that has not returned within callBound is a
// hang.
func call(obj any, m reflect.Method) outcome {
	o := outcome{method: m.Name}
	args, cancel := zeroArgs(m)
	defer cancel()
	done := make(chan outcome, 1)
	go func() {
		r := o
		defer func() {
			if p := recover(); p != nil {
				r.panic = p
			}
			done <- r
		}()
		var out []reflect.Value
		if m.Type.IsVariadic() {
			out = m.Func.CallSlice(append([]reflect.Value{reflect.ValueOf(obj)}, append(args, reflect.Zero(m.Type.In(m.Type.NumIn()-1)))...))
		} else {
			out = m.Func.Call(append([]reflect.Value{reflect.ValueOf(obj)}, args...))
		}
		if n := len(out); n > 0 && m.Type.Out(n-1) == errorType {
			r.hasErr = true
			if e := out[n-1].Interface(); e != nil {
				r.err = e.(error)
			}
		}
	}()
	select {
	case r := <-done:
		return r
	case <-time.After(callBound):
		o.hung = true
		return o
	}
}

// methods lists the exported methods of obj's type: the matrix covers each
// one, so a method added later is covered without touching this test.
func methods(obj any) []reflect.Method {
	t := reflect.TypeOf(obj)
	ms := make([]reflect.Method, 0, t.NumMethod())
	for i := 0; i < t.NumMethod(); i++ {
		ms = append(ms, t.Method(i))
	}
	return ms
}

// closedOK reports whether err is what an operation on a closed object may
// return: verbs.ErrClosed, or for rpma objects an RPMA_E_* error as librpma
// would return for a deleted object.
func closedOK(obj any, err error) bool {
	if errors.Is(err, verbs.ErrClosed) {
		return true
	}
	var re *rpma.Error
	return strings.HasPrefix(reflect.TypeOf(obj).String(), "*rpma.") && errors.As(err, &re)
}

// checkClosed calls every method of obj, which is closed, with zero
// arguments: none may panic or hang, and every method that returns an
// error must fail with the closed error. Close itself may also succeed (a
// second Close is a no-op).
func checkClosed(t *testing.T, obj any) {
	t.Helper()
	for _, m := range methods(obj) {
		o := call(obj, m)
		switch {
		case o.hung:
			t.Errorf("%T.%s on a closed object did not return within %v", obj, m.Name, callBound)
		case o.panic != nil:
			t.Errorf("%T.%s on a closed object panicked: %v", obj, m.Name, o.panic)
		case !o.hasErr:
		case m.Name == "Close":
			if o.err != nil && !closedOK(obj, o.err) {
				t.Errorf("%T.%s a second time: %v; want nil or the closed error", obj, m.Name, o.err)
			}
		case o.err == nil:
			t.Errorf("%T.%s on a closed object succeeded", obj, m.Name)
		case !closedOK(obj, o.err):
			t.Errorf("%T.%s on a closed object: %v; want an error matching verbs.ErrClosed", obj, m.Name, o.err)
		}
	}
}

// checkZeroArgs calls every method of a fresh object (made by mk, closed by
// the returned function) with zero arguments: nil slices and pointers,
// zero sizes and keys. None may panic or hang; what a method returns is its
// own business (many zero arguments are valid).
func checkZeroArgs(t *testing.T, name string, mk func(t *testing.T) (any, func())) {
	t.Helper()
	probe, release := mk(t)
	ms := methods(probe)
	release()
	for _, m := range ms {
		obj, release := mk(t)
		o := call(obj, m)
		if o.hung {
			t.Errorf("%s.%s with zero arguments did not return within %v", name, m.Name, callBound)
		}
		if o.panic != nil {
			t.Errorf("%s.%s with zero arguments panicked: %v", name, m.Name, o.panic)
		}
		release()
	}
}

// objects opens one of each kind of object on the test device, in an order
// that lets each be built from the ones before.
type objects struct {
	ctx   *verbs.Context
	pd    *verbs.PD
	ch    *verbs.CompChannel
	m     *mr.MR
	mw    *mr.MW
	buf   *mr.Buffer
	cq    *cq.CQ
	srq   *srq.SRQ
	qp    *qp.QP
	ah    *verbs.AH
	cmch  *cm.Channel
	id    *cm.ID
	peer  *rpma.Peer
	lmr   *rpma.LocalMR
	rpsrq *rpma.SRQ
}

func open(t *testing.T) *objects {
	t.Helper()
	dev := testutil.Device(t)
	ctx, err := verbs.OpenDevice(dev)
	must(t, err)
	o := &objects{ctx: ctx}
	o.pd, err = ctx.AllocPD()
	must(t, err)
	o.ch, err = ctx.NewCompChannel()
	must(t, err)
	o.m, err = mr.New(o.pd, 4096, mr.LocalWrite|mr.RemoteWrite|mr.RemoteRead|mr.MWBind)
	must(t, err)
	attr, err := ctx.QueryDevice()
	must(t, err)
	// Memory windows and address handles only where the device has them
	// (siw reports max_mw 0 and, being iWARP, has no address handles):
	// objects of a kind the device cannot make are not in the matrix.
	if attr.MaxMW > 0 {
		o.mw, err = mr.AllocMW(o.pd, mr.MWType2)
		must(t, err)
	} else {
		t.Logf("no memory windows on %s (max_mw 0): left out", dev.Name)
	}
	o.buf, err = mr.Alloc(4096)
	must(t, err)
	o.cq, err = cq.New(ctx, cq.Options{CQE: 16, Channel: o.ch})
	must(t, err)
	o.srq, err = srq.New(o.pd, srq.Attr{MaxWR: 16, MaxSGE: 1})
	must(t, err)
	o.qp, err = qp.New(o.pd, qp.Options{Type: qp.RC, SendCQ: o.cq, RecvCQ: o.cq, Caps: qp.Caps{MaxSendWR: 4, MaxRecvWR: 4, MaxSendSGE: 1, MaxRecvSGE: 1}})
	must(t, err)
	if attr.MaxAH > 0 && dev.NodeType.Transport() != verbs.TransportIWARP {
		o.ah, err = o.pd.CreateAH(ptr(testutil.Path(t, ctx)))
		must(t, err)
	} else {
		t.Logf("no address handles on %s (%s): left out", dev.Name, dev.NodeType.Transport())
	}
	o.cmch, err = cm.NewChannel()
	must(t, err)
	o.id, err = o.cmch.CreateID(cm.TCP)
	must(t, err)
	must(t, o.id.Bind(netip.AddrPortFrom(netip.MustParseAddr(testutil.Addr(t)), 0)))
	o.peer, err = rpma.NewPeer(ctx)
	must(t, err)
	o.lmr, err = o.peer.RegisterMR(make([]byte, 4096), rpma.UsageWriteDst|rpma.UsageReadSrc|rpma.UsageSend|rpma.UsageRecv)
	must(t, err)
	o.rpsrq, err = o.peer.NewSRQ(nil)
	must(t, err)
	return o
}

func ptr[T any](v T) *T { return &v }

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// TestClosedObjects closes each object (children before parents, as a
// program would) and then calls every exported method on it.
func TestClosedObjects(t *testing.T) {
	o := open(t)
	type closer interface{ Close() error }
	order := []struct {
		name string
		obj  any
		done func() error
	}{
		{"rpma SRQ", o.rpsrq, o.rpsrq.Close},
		{"rpma LocalMR", o.lmr, o.lmr.Close},
		{"rpma Peer", o.peer, o.peer.Close},
		{"cm ID", o.id, o.id.Close},
		{"cm Channel", o.cmch, o.cmch.Close},
		{"QP", o.qp, o.qp.Close},
		{"SRQ", o.srq, o.srq.Close},
		{"CQ", o.cq, o.cq.Close},
		{"AH", o.ah, o.ah.Close},
		{"MW", o.mw, o.mw.Close},
		{"MR", o.m, o.m.Close},
		{"Buffer", o.buf, o.buf.Close},
		{"CompChannel", o.ch, o.ch.Close},
		{"PD", o.pd, o.pd.Close},
		{"Context", o.ctx, o.ctx.Close},
	}
	for _, c := range order {
		if reflect.ValueOf(c.obj).IsNil() {
			continue // a kind the device cannot make
		}
		if err := c.done(); err != nil {
			t.Fatalf("closing the %s: %v", c.name, err)
		}
		t.Run(strings.ReplaceAll(c.name, " ", "_"), func(t *testing.T) { checkClosed(t, c.obj) })
	}
}

// TestParentClosedFirst closes the Context under live objects: each of
// them then behaves as closed (Context.Close destroyed it).
func TestParentClosedFirst(t *testing.T) {
	o := open(t)
	// rdma_cm and rpma objects hold their own references; the verbs
	// objects are the Context's.
	for _, c := range []interface{ Close() error }{o.rpsrq, o.lmr, o.peer, o.id, o.cmch} {
		must(t, c.Close())
	}
	must(t, o.ctx.Close())
	for _, obj := range []any{o.pd, o.ch, o.m, o.mw, o.cq, o.srq, o.qp, o.ah} {
		if reflect.ValueOf(obj).IsNil() {
			continue // a kind the device cannot make
		}
		t.Run(fmt.Sprintf("%T", obj), func(t *testing.T) { checkClosed(t, obj) })
	}
}

// TestZeroArguments calls every method of each open object with zero
// arguments, on a fresh object each time.
func TestZeroArguments(t *testing.T) {
	o := open(t)
	t.Cleanup(func() {
		for _, c := range []interface{ Close() error }{o.rpsrq, o.lmr, o.peer, o.id, o.cmch, o.ctx} {
			c.Close()
		}
	})
	fresh := map[string]func(t *testing.T) (any, func()){
		"CQ": func(t *testing.T) (any, func()) {
			c, err := cq.New(o.ctx, cq.Options{CQE: 4, Channel: o.ch})
			must(t, err)
			return c, func() { c.Close() }
		},
		"QP": func(t *testing.T) (any, func()) {
			q, err := qp.New(o.pd, qp.Options{Type: qp.RC, SendCQ: o.cq, RecvCQ: o.cq, Caps: qp.Caps{MaxSendWR: 2, MaxRecvWR: 2, MaxSendSGE: 1, MaxRecvSGE: 1}})
			must(t, err)
			return q, func() { q.Close() }
		},
		"SRQ": func(t *testing.T) (any, func()) {
			s, err := srq.New(o.pd, srq.Attr{MaxWR: 4, MaxSGE: 1})
			must(t, err)
			return s, func() { s.Close() }
		},
		"MR": func(t *testing.T) (any, func()) {
			m, err := mr.New(o.pd, 4096, mr.LocalWrite)
			must(t, err)
			return m, func() { m.Close() }
		},
		"MW": func(t *testing.T) (any, func()) {
			w, err := mr.AllocMW(o.pd, mr.MWType2)
			must(t, err)
			return w, func() { w.Close() }
		},
		"PD": func(t *testing.T) (any, func()) {
			pd, err := o.ctx.AllocPD()
			must(t, err)
			return pd, func() { pd.Close() }
		},
		"CompChannel": func(t *testing.T) (any, func()) {
			ch, err := o.ctx.NewCompChannel()
			must(t, err)
			return ch, func() { ch.Close() }
		},
		"AH": func(t *testing.T) (any, func()) {
			ah, err := o.pd.CreateAH(ptr(testutil.Path(t, o.ctx)))
			must(t, err)
			return ah, func() { ah.Close() }
		},
		"cm_ID": func(t *testing.T) (any, func()) {
			id, err := o.cmch.CreateID(cm.TCP)
			must(t, err)
			return id, func() { id.Close() }
		},
		"rpma_LocalMR": func(t *testing.T) (any, func()) {
			l, err := o.peer.RegisterMR(make([]byte, 64), rpma.UsageReadSrc)
			must(t, err)
			return l, func() { l.Close() }
		},
	}
	if o.mw == nil {
		delete(fresh, "MW")
	}
	if o.ah == nil {
		delete(fresh, "AH")
	}
	for name, mk := range fresh {
		t.Run(name, func(t *testing.T) { checkZeroArgs(t, name, mk) })
	}
}
