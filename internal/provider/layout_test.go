package provider_test

import (
	"errors"
	"reflect"
	"testing"
	"unsafe"

	"github.com/goverbs/goverbs/internal/kobj"
	"github.com/goverbs/goverbs/internal/provider"
	"github.com/goverbs/goverbs/verbs"
)

// sameLayout reports how the memory layout of ours differs from that of
// theirs: field names, offsets, sizes and kinds, recursively. A pointer
// and an unsafe.Pointer are the same to the garbage collector and to a
// provider, which never follows the caller's AH.
func sameLayout(t *testing.T, path string, ours, theirs reflect.Type) {
	t.Helper()
	if ours.Size() != theirs.Size() || ours.Align() != theirs.Align() {
		t.Errorf("%s: %s is %d bytes (align %d), %s %d (align %d)", path, ours, ours.Size(), ours.Align(), theirs, theirs.Size(), theirs.Align())
		return
	}
	ok, tk := ours.Kind(), theirs.Kind()
	if ok == reflect.UnsafePointer && tk == reflect.Pointer {
		return
	}
	if ok != tk {
		t.Errorf("%s: %s is a %s, %s a %s", path, ours, ok, theirs, tk)
		return
	}
	switch ok {
	case reflect.Struct:
		if ours.NumField() != theirs.NumField() {
			t.Errorf("%s: %s has %d fields, %s %d", path, ours, ours.NumField(), theirs, theirs.NumField())
			return
		}
		for i := range ours.NumField() {
			a, b := ours.Field(i), theirs.Field(i)
			if a.Name != b.Name || a.Offset != b.Offset {
				t.Errorf("%s: field %d is %s at %d, %s's is %s at %d", path, i, a.Name, a.Offset, theirs, b.Name, b.Offset)
				continue
			}
			sameLayout(t, path+"."+a.Name, a.Type, b.Type)
		}
	case reflect.Slice, reflect.Array:
		if ok == reflect.Array && ours.Len() != theirs.Len() {
			t.Errorf("%s: %d elements, %d", path, ours.Len(), theirs.Len())
		}
		sameLayout(t, path+"[]", ours.Elem(), theirs.Elem())
	}
}

// The provider's view of work requests and completions is verbs' memory,
// field for field: provider.View hands the caller's slices over without
// a copy.
func TestMirrorsVerbs(t *testing.T) {
	for _, tc := range []struct{ ours, theirs any }{
		{provider.SGE{}, verbs.SGE{}},
		{provider.RecvWR{}, verbs.RecvWR{}},
		{provider.SendWR{}, verbs.SendWR{}},
		{provider.MWBind{}, verbs.MWBind{}},
		{provider.WC{}, verbs.WorkCompletion{}},
	} {
		o, th := reflect.TypeOf(tc.ours), reflect.TypeOf(tc.theirs)
		sameLayout(t, o.Name(), o, th)
	}
}

// sameLayout itself catches a drift: a field added to one side only, a
// field moved, a field of another size.
func TestSameLayoutCatchesDrift(t *testing.T) {
	type base struct {
		A uint64
		B uint32
		P *int
	}
	for name, other := range map[string]any{
		"added": struct {
			A uint64
			B uint32
			P *int
			C uint32
		}{},
		"moved": struct {
			B uint32
			A uint64
			P *int
		}{},
		"resized": struct {
			A uint64
			B uint16
			P *int
		}{},
		"renamed": struct {
			A uint64
			C uint32
			P *int
		}{},
	} {
		ft := new(testing.T)
		sameLayout(ft, name, reflect.TypeOf(other), reflect.TypeOf(base{}))
		if !ft.Failed() {
			t.Errorf("%s: drift not caught", name)
		}
	}
}

// The constants a provider reads and writes are verbs' values.
func TestConstantsAreVerbs(t *testing.T) {
	type pair struct {
		name         string
		ours, theirs uint64
	}
	pairs := []pair{
		{"WRRDMAWrite", uint64(provider.WRRDMAWrite), uint64(verbs.WRRDMAWrite)},
		{"WRRDMAWriteWithImm", uint64(provider.WRRDMAWriteWithImm), uint64(verbs.WRRDMAWriteWithImm)},
		{"WRSend", uint64(provider.WRSend), uint64(verbs.WRSend)},
		{"WRSendWithImm", uint64(provider.WRSendWithImm), uint64(verbs.WRSendWithImm)},
		{"WRRDMARead", uint64(provider.WRRDMARead), uint64(verbs.WRRDMARead)},
		{"WRAtomicCmpAndSwp", uint64(provider.WRAtomicCmpAndSwp), uint64(verbs.WRAtomicCmpAndSwp)},
		{"WRAtomicFetchAndAdd", uint64(provider.WRAtomicFetchAndAdd), uint64(verbs.WRAtomicFetchAndAdd)},
		{"WRLocalInv", uint64(provider.WRLocalInv), uint64(verbs.WRLocalInv)},
		{"WRBindMW", uint64(provider.WRBindMW), uint64(verbs.WRBindMW)},
		{"WRSendWithInv", uint64(provider.WRSendWithInv), uint64(verbs.WRSendWithInv)},
		{"WRFlush", uint64(provider.WRFlush), uint64(verbs.WRFlush)},
		{"WRAtomicWrite", uint64(provider.WRAtomicWrite), uint64(verbs.WRAtomicWrite)},
		{"SendFence", uint64(provider.SendFence), uint64(verbs.SendFence)},
		{"SendSignaled", uint64(provider.SendSignaled), uint64(verbs.SendSignaled)},
		{"SendSolicited", uint64(provider.SendSolicited), uint64(verbs.SendSolicited)},
		{"SendInline", uint64(provider.SendInline), uint64(verbs.SendInline)},
		{"WCSuccess", uint64(provider.WCSuccess), uint64(verbs.WCSuccess)},
		{"WCLocLenErr", uint64(provider.WCLocLenErr), uint64(verbs.WCLocLenErr)},
		{"WCLocQPOpErr", uint64(provider.WCLocQPOpErr), uint64(verbs.WCLocQPOpErr)},
		{"WCLocProtErr", uint64(provider.WCLocProtErr), uint64(verbs.WCLocProtErr)},
		{"WCWRFlushErr", uint64(provider.WCWRFlushErr), uint64(verbs.WCWRFlushErr)},
		{"WCBadRespErr", uint64(provider.WCBadRespErr), uint64(verbs.WCBadRespErr)},
		{"WCLocAccessErr", uint64(provider.WCLocAccessErr), uint64(verbs.WCLocAccessErr)},
		{"WCRemInvReqErr", uint64(provider.WCRemInvReqErr), uint64(verbs.WCRemInvReqErr)},
		{"WCRemAccessErr", uint64(provider.WCRemAccessErr), uint64(verbs.WCRemAccessErr)},
		{"WCRemOpErr", uint64(provider.WCRemOpErr), uint64(verbs.WCRemOpErr)},
		{"WCRetryExcErr", uint64(provider.WCRetryExcErr), uint64(verbs.WCRetryExcErr)},
		{"WCRNRRetryExcErr", uint64(provider.WCRNRRetryExcErr), uint64(verbs.WCRNRRetryExcErr)},
		{"WCFatalErr", uint64(provider.WCFatalErr), uint64(verbs.WCFatalErr)},
		{"WCRespTimeoutErr", uint64(provider.WCRespTimeoutErr), uint64(verbs.WCRespTimeoutErr)},
		{"WCGeneralErr", uint64(provider.WCGeneralErr), uint64(verbs.WCGeneralErr)},
		{"WCSend", uint64(provider.WCSend), uint64(verbs.WCSend)},
		{"WCRDMAWrite", uint64(provider.WCRDMAWrite), uint64(verbs.WCRDMAWrite)},
		{"WCRDMARead", uint64(provider.WCRDMARead), uint64(verbs.WCRDMARead)},
		{"WCCompSwap", uint64(provider.WCCompSwap), uint64(verbs.WCCompSwap)},
		{"WCFetchAdd", uint64(provider.WCFetchAdd), uint64(verbs.WCFetchAdd)},
		{"WCBindMW", uint64(provider.WCBindMW), uint64(verbs.WCBindMW)},
		{"WCLocalInv", uint64(provider.WCLocalInv), uint64(verbs.WCLocalInv)},
		{"WCFlush", uint64(provider.WCFlush), uint64(verbs.WCFlush)},
		{"WCAtomicWrite", uint64(provider.WCAtomicWrite), uint64(verbs.WCAtomicWrite)},
		{"WCRecv", uint64(provider.WCRecv), uint64(verbs.WCRecv)},
		{"WCRecvRDMAWithImm", uint64(provider.WCRecvRDMAWithImm), uint64(verbs.WCRecvRDMAWithImm)},
		{"WCGRH", uint64(provider.WCGRH), uint64(verbs.WCGRH)},
		{"WCWithImm", uint64(provider.WCWithImm), uint64(verbs.WCWithImm)},
		{"WCWithInvalidate", uint64(provider.WCWithInvalidate), uint64(verbs.WCWithInvalidate)},
	}
	for _, p := range pairs {
		if p.ours != p.theirs {
			t.Errorf("provider.%s = %d, verbs.%s = %d", p.name, p.ours, p.name, p.theirs)
		}
	}
}

// View is the same memory, of the same length.
func TestView(t *testing.T) {
	wrs := []verbs.SendWR{{WRID: 1, Opcode: verbs.WRRDMARead, RemoteAddr: 0x1000}, {WRID: 2, InlineData: []byte("x")}}
	v := provider.View[provider.SendWR](wrs)
	if len(v) != 2 || unsafe.Pointer(&v[0]) != unsafe.Pointer(&wrs[0]) || v[0].Opcode != provider.WRRDMARead || v[1].WRID != 2 || string(v[1].InlineData) != "x" {
		t.Fatalf("View: %+v", v)
	}
	if v := provider.View[provider.RecvWR]([]verbs.RecvWR(nil)); v != nil {
		t.Fatalf("View(nil) = %v", v)
	}
}

// The generic code's error tables (kobj.PostErrors, made by verbs) turn
// each reason into verbs' sentinel, inside a *verbs.PostError naming the
// operation and the work request.
func TestReasonsAreVerbsErrors(t *testing.T) {
	e := kobj.PostErrors("t: post")
	for r, want := range map[provider.Reason]error{
		provider.ReasonClosed:         verbs.ErrClosed,
		provider.ReasonState:          verbs.ErrQPState,
		provider.ReasonFull:           verbs.ErrQueueFull,
		provider.ReasonTooManySGE:     verbs.ErrTooManySGE,
		provider.ReasonInlineTooLarge: verbs.ErrInlineTooLarge,
		provider.ReasonBadOpcode:      verbs.ErrBadOpcode,
		provider.ReasonNotCapable:     verbs.ErrNotCapable,
	} {
		pe, ok := verbs.IsPostError(e.At(3, r))
		if !ok || pe.Err != want || pe.Index != 3 || pe.Op != "t: post" {
			t.Errorf("reason %d: %v, want %v at 3", r, e.At(3, r), want)
		}
	}
	if pe, _ := verbs.IsPostError(e.Full(2)); pe == nil || pe.Err != verbs.ErrQueueFull || pe.Index != 2 {
		t.Errorf("Full(2) = %v", e.Full(2))
	}
	if !errors.Is(e.Closed(), verbs.ErrClosed) || !errors.Is(e.State(), verbs.ErrQPState) {
		t.Errorf("Closed %v, State %v", e.Closed(), e.State())
	}
}
