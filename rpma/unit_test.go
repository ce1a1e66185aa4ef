package rpma

import (
	"errors"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/goverbs/goverbs/cm"
	"github.com/goverbs/goverbs/mr"
	"github.com/goverbs/goverbs/verbs"
)

// The deprecated completion API translates every ibv opcode as librpma
// 1.2 does.
func TestTranslateTable(t *testing.T) {
	for _, tc := range []struct {
		op   verbs.WCOpcode
		want Op
		ok   bool
	}{
		{verbs.WCSend, OpSend, true},
		{verbs.WCRDMAWrite, OpWrite, true},
		{verbs.WCRDMARead, OpRead, true},
		{verbs.WCCompSwap, 0, false},
		{verbs.WCFetchAdd, 0, false},
		{verbs.WCBindMW, 0, false},
		{verbs.WCLocalInv, 0, false},
		{verbs.WCTSO, 0, false},
		{8, 0, false}, // IBV_WC_FLUSH (rdma-core 45+)
		{9, 0, false}, // IBV_WC_ATOMIC_WRITE
		{verbs.WCRecv, OpRecv, true},
		{verbs.WCRecvRDMAWithImm, OpRecvRDMAWithImm, true},
		{130, 0, false}, // IBV_WC_TM_ADD
		{131, 0, false}, // IBV_WC_TM_DEL
		{132, 0, false}, // IBV_WC_TM_SYNC
		{133, 0, false}, // IBV_WC_TM_RECV
		{134, 0, false}, // IBV_WC_TM_NO_TAG
		{135, 0, false}, // IBV_WC_DRIVER1
		{136, 0, false}, // IBV_WC_DRIVER2
		{137, 0, false}, // IBV_WC_DRIVER3
	} {
		wc := verbs.WorkCompletion{WRID: 0xF01D, Opcode: tc.op, ByteLen: 8, Flags: verbs.WCWithImm | verbs.WCGRH, ImmData: verbs.HostToImm(0x01020304)}
		got, err := translate(&wc)
		if tc.ok != (err == nil) {
			t.Errorf("opcode %s: error %v", tc.op, err)
			continue
		}
		if !tc.ok {
			if !errors.Is(err, ErrNotSupported) || Code(err) != -100001 {
				t.Errorf("opcode %s: %v, want RPMA_E_NOSUPP", tc.op, err)
			}
			continue
		}
		if got.Op != tc.want || got.OpContext != 0xF01D || got.ByteLen != 8 || got.Flags != 3 {
			t.Errorf("opcode %s: %+v", tc.op, got)
		}
		wantImm := uint32(0)
		if tc.want == OpRecv || tc.want == OpRecvRDMAWithImm {
			wantImm = 0x01020304
		}
		if got.Imm != wantImm {
			t.Errorf("opcode %s: imm %#x, want %#x", tc.op, got.Imm, wantImm)
		}
	}
	// On an error status only the op context and the status are set.
	wc := verbs.WorkCompletion{WRID: 7, Status: verbs.WCRemAccessErr, Opcode: verbs.WCCompSwap, ByteLen: 99}
	got, err := translate(&wc)
	if err != nil || got != (Completion{OpContext: 7, OpStatus: verbs.WCRemAccessErr}) {
		t.Errorf("error completion: %+v %v", got, err)
	}
	// Without WITH_IMM no immediate is reported.
	wc = verbs.WorkCompletion{Opcode: verbs.WCRecv, ImmData: 5}
	if got, _ := translate(&wc); got.Imm != 0 {
		t.Errorf("receive without WITH_IMM: imm %d", got.Imm)
	}
}

func TestErrorStrings(t *testing.T) {
	for code, want := range map[int]string{
		0: "Success", -100000: "Unknown error", -100001: "Not supported", -100002: "Provider error occurred",
		-100003: "Out of memory", -100004: "Invalid argument", -100005: "No next completion available",
		-100006: "No next event available", -100007: "Temporary error, try again",
		-100008: "Completion channel is shared", -100009: "Completion channel is not shared", -5: "Unknown error",
	} {
		if got := ErrorString(code); got != want {
			t.Errorf("ErrorString(%d) = %q, want %q", code, got, want)
		}
	}
	err := provider(unix.EINVAL)
	if !errors.Is(err, ErrProvider) || !errors.Is(err, unix.EINVAL) || Code(err) != -100002 {
		t.Errorf("wrapped provider error: %v", err)
	}
	if Code(nil) != 0 || Code(errors.New("x")) != -100000 {
		t.Error("Code of nil / foreign error")
	}
	if ErrInval.Error() != "Invalid argument" || ErrInval.Code() != -100004 {
		t.Error("ErrInval")
	}
}

func TestDescriptors(t *testing.T) {
	// The fact sheet's measured descriptor.
	desc := []byte{0x00, 0x00, 0x21, 0x02, 0xae, 0x55, 0x00, 0x00, 0x00, 0x10, 0, 0, 0, 0, 0, 0, 0x68, 0x74, 0, 0, 0x99}
	r, err := RemoteMRFromDescriptor(desc)
	if err != nil {
		t.Fatal(err)
	}
	if r.Addr != 0x55ae02210000 || r.Length != 4096 || r.RKey != 0x7468 || r.Usage != 0x99 || r.FlushType() != UsageFlushVisibility {
		t.Fatalf("%+v", r)
	}
	if _, err := RemoteMRFromDescriptor(desc[:20]); !errors.Is(err, ErrInval) {
		t.Errorf("20-byte descriptor: %v", err)
	}
	if _, err := RemoteMRFromDescriptor(append(desc, 1, 2)); err != nil {
		t.Errorf("23-byte descriptor: %v", err)
	}
	zero := append([]byte(nil), desc...)
	zero[20] = 0
	if _, err := RemoteMRFromDescriptor(zero); !errors.Is(err, ErrInval) {
		t.Errorf("usage 0: %v", err)
	}
	if pc, err := PeerCfgFromDescriptor([]byte{7}); err != nil || !pc.DirectWriteToPMem {
		t.Errorf("peer cfg 7: %+v %v", pc, err)
	}
	if _, err := PeerCfgFromDescriptor(nil); !errors.Is(err, ErrInval) {
		t.Errorf("empty peer cfg: %v", err)
	}
	if got := (&PeerCfg{}).Descriptor(); len(got) != 1 || got[0] != 0 {
		t.Errorf("default peer cfg descriptor %v", got)
	}
	if got := (&PeerCfg{true}).Descriptor(); got[0] != 1 {
		t.Errorf("direct-write descriptor %v", got)
	}
	// usage → access, librpma's table.
	for u, want := range map[Usage]uint32{
		UsageReadSrc: 4, UsageReadDst: 1, UsageWriteSrc: 1, UsageWriteDst: 3, UsageFlushVisibility: 4,
		UsageFlushPersistent: 4, UsageSend: 0, UsageRecv: 1,
	} {
		if got := uint32(u.access(false, false)); got != want {
			t.Errorf("usage %#x → access %#x, want %#x", u, got, want)
		}
	}
	if uint32(UsageReadDst.access(true, false)) != 3 {
		t.Error("iWARP read destination must be remotely writable")
	}
}

func TestNativeCapabilitySelection(t *testing.T) {
	if nativeFlush(0) || nativeAtomicWrite(0) || nativeFlush(verbs.DeviceCapFlushGlobal) {
		t.Error("native paths chosen without the capabilities")
	}
	if !nativeFlush(verbs.DeviceCapFlushGlobal|verbs.DeviceCapFlushPersistent) || !nativeAtomicWrite(verbs.DeviceCapAtomicWrite) {
		t.Error("native paths not chosen with the capabilities")
	}
	// Native flush adds the flush access and keeps remote read.
	u := UsageFlushVisibility | UsageFlushPersistent
	if got, want := uint32(u.access(false, true)), uint32(mr.RemoteRead|mr.Access(verbs.AccessFlushGlobal|verbs.AccessFlushPersistent)); got != want {
		t.Errorf("native flush access %#x, want %#x", got, want)
	}
}

func TestNilArguments(t *testing.T) {
	var c *Conn
	var q *CQ
	var s *SRQ
	var p *Peer
	for name, err := range map[string]error{
		"read":       c.Read(nil, 0, nil, 0, 0, Always, 0),
		"write":      c.Write(nil, 0, nil, 0, 0, Always, 0),
		"send":       c.Send(nil, 0, 0, Always, 0),
		"recv":       c.Recv(nil, 0, 0, 0),
		"flush":      c.Flush(nil, 0, 0, FlushVisibility, Always, 0),
		"atomic":     c.AtomicWrite(nil, 0, [8]byte{}, Always, 0),
		"apply":      c.ApplyRemotePeerCfg(nil),
		"cq wait":    q.Wait(nil),
		"srq recv":   s.Recv(nil, 0, 0, 0),
		"disconnect": c.Disconnect(),
	} {
		if !errors.Is(err, ErrInval) {
			t.Errorf("%s on nil: %v", name, err)
		}
	}
	if _, err := q.GetWC(make([]verbs.WorkCompletion, 1)); !errors.Is(err, ErrInval) {
		t.Errorf("GetWC on nil: %v", err)
	}
	if _, err := NewPeer(nil); !errors.Is(err, ErrInval) {
		t.Errorf("NewPeer(nil): %v", err)
	}
	if _, err := p.RegisterMR([]byte{1}, UsageSend); !errors.Is(err, ErrInval) {
		t.Errorf("RegisterMR on nil peer: %v", err)
	}
	if _, err := (&ConnCfg{Timeout: -1}).orDefault(); !errors.Is(err, ErrInval) {
		t.Errorf("negative timeout: %v", err)
	}
	if _, err := parseAddr("1.2.3.4", "notaport"); !errors.Is(err, ErrInval) {
		t.Errorf("bad port: %v", err)
	}
	if _, err := Always.send(); err != nil {
		t.Error(err)
	}
	if _, err := CompletionFlags(0).send(); !errors.Is(err, ErrInval) {
		t.Errorf("flags 0: %v", err)
	}
	if ConnEvent(7).String() != "Unsupported connection event" || ConnRejected.String() != "Connection rejected" {
		t.Error("conn event strings")
	}
}

// A failed connect's first event is named as rpma_conn_next_event names
// the cm event: CONNECT_ERROR is a lost connection, not an unreachable
// peer (seen on siw, where a passive side that sends first ends the
// client's connect in CONNECT_ERROR).
func TestFirstEvent(t *testing.T) {
	for ev, want := range map[cm.EventType]ConnEvent{
		cm.EventConnectError:   ConnLost,
		cm.EventDeviceRemoval:  ConnLost,
		cm.EventUnreachable:    ConnUnreachable,
		cm.EventRejected:       ConnRejected,
		cm.EventEstablished:    ConnUndefined,
		cm.EventDisconnected:   ConnUndefined,
		cm.EventAddrError:      ConnUndefined,
		cm.EventConnectRequest: ConnUndefined,
	} {
		if got := firstEvent(ev); got != want {
			t.Errorf("firstEvent(%v) = %v, want %v", ev, got, want)
		}
	}
}
