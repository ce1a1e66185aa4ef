package perftest

import (
	"bytes"
	"context"
	"errors"
	"math"
	"net"
	"strings"
	"sync"
	"testing"
	"time"
)

var testGID = [16]byte{10: 0xff, 11: 0xff, 12: 169, 13: 254, 14: 77, 15: 1}

func TestDestWireFormat(t *testing.T) {
	d := Dest{LID: 0, OutReads: 0x10, QPN: 0x11, PSN: 0xabcdef, RKey: 0x1234, VAddr: 0x7f0012345000, GID: testGID}
	msg, err := MarshalDest(d, true)
	if err != nil {
		t.Fatal(err)
	}
	want := "0000:0010:000011:abcdef:00001234:00007f0012345000:00:00:00:00:00:00:00:00:00:00:ff:ff:a9:fe:4d:01:00000000:\x00"
	if string(msg) != want || len(msg) != DestSizeGID {
		t.Fatalf("MarshalDest = %q (%d bytes), want %q (%d)", msg, len(msg), want, DestSizeGID)
	}
	if got, err := ParseDest(msg, true); err != nil || got != d {
		t.Fatalf("ParseDest(MarshalDest) = %+v, %v; want %+v", got, err, d)
	}
	d.GID = [16]byte{}
	msg, err = MarshalDest(d, false)
	want = "0000:0010:000011:abcdef:00001234:00007f0012345000:00000000\x00"
	if err != nil || string(msg) != want || len(msg) != DestSize {
		t.Fatalf("MarshalDest without GID = %q, %v; want %q", msg, err, want)
	}
	if got, err := ParseDest(msg, false); err != nil || got != d {
		t.Fatalf("ParseDest(no GID) = %+v, %v", got, err)
	}
	// A QPN wider than its 6 digits would shift every later field.
	if _, err := MarshalDest(Dest{QPN: 1 << 24}, true); err == nil {
		t.Error("MarshalDest accepted a QPN of 7 hex digits")
	}
	// What ib_write_bw sends: whatever follows the NUL is stack garbage.
	c := []byte("0000:0001:0000a3:7e1c2d:0000034d:0000560d0e034000:fe:80:00:00:00:00:00:00:00:00:00:00:00:00:00:01:00000000:\x00\xde\xad")
	got, err := ParseDest(c, true)
	if err != nil || got.QPN != 0xa3 || got.RKey != 0x34d || got.VAddr != 0x560d0e034000 || got.GID[0] != 0xfe || got.GID[15] != 1 || got.OutReads != 1 {
		t.Fatalf("ParseDest(C message) = %+v, %v", got, err)
	}
	for _, bad := range []string{
		"",
		"0000:0001:0000a3",
		"zz00:0001:0000a3:7e1c2d:0000034d:0000560d0e034000:00000000",
		"0000:0001:0000a3:7e1c2d:0000034d:0000560d0e034000:-0000001",
		"0000:0001:0000a3:7e1c2d:0000034d:10000560d0e034000000:00000000",
		"0000:0001:0000a3:7e1c2d:0000034d:0000560d0e034000:fe:80:00:00:00:00:00:00:00:00:00:00:00:00:00:100:00000000:",
		"0000:0001:0000a3:7e1c2d:0000034d:0000560d0e034000:fe:80:00:00:00:00:00:00:00:00:00:00:00:00:00:01:00000000:x",
	} {
		withGID := strings.Count(bad, ":") > 10
		if _, err := ParseDest([]byte(bad), withGID); !errors.Is(err, ErrFormat) {
			t.Errorf("ParseDest(%q) = %v, want ErrFormat", bad, err)
		}
	}
}

func TestParseVersion(t *testing.T) {
	for in, want := range map[string]float64{"6.06\x00\x00": 6.06, "5.70": 5.70, "6.06-rc1\x00": 6.06, "4.5.1": 4.5} {
		if got, err := ParseVersion([]byte(in)); err != nil || got != want {
			t.Errorf("ParseVersion(%q) = %v, %v; want %v", in, got, err, want)
		}
	}
	for _, bad := range []string{"", "\x00", "abc", "."} {
		if _, err := ParseVersion([]byte(bad)); !errors.Is(err, ErrFormat) {
			t.Errorf("ParseVersion(%q) = %v, want ErrFormat", bad, err)
		}
	}
}

func TestIPv4Mapped(t *testing.T) {
	if !IsIPv4Mapped(testGID) {
		t.Error("::ffff:169.254.77.1 not IPv4-mapped")
	}
	if IsIPv4Mapped([16]byte{0: 0xfe, 1: 0x80, 15: 1}) {
		t.Error("fe80::1 IPv4-mapped")
	}
	if !IsIPv4Mapped([16]byte{0: 0xff, 1: 0x0e, 10: 0xff, 11: 0xff, 12: 224, 15: 1}) {
		t.Error("IPv4 multicast GID not IPv4-mapped")
	}
}

// The whole exchange between two Conns, byte for byte what the C tools
// send: versions, sys data, MTU, handshakes, reports, done.
func TestExchange(t *testing.T) {
	a, b := net.Pipe()
	client, server := &Conn{nc: a, client: true}, &Conn{nc: b}
	ctx := context.Background()
	cd := Dest{QPN: 1, PSN: 2, RKey: 3, VAddr: 4, GID: testGID, OutReads: 1}
	sd := Dest{QPN: 5, PSN: 6, RKey: 7, VAddr: 8, GID: testGID, OutReads: 1}
	rep := BWReport{Size: 65536, Iters: 20, BWPeak: 5.03, BWAvg: 4.5, MsgRate: 0.00008}
	var wg sync.WaitGroup
	var serverErr error
	var gotRep BWReport
	var gotDest Dest
	var cycle, cl, mtu int
	wg.Add(1)
	go func() {
		defer wg.Done()
		serverErr = func() error {
			if err := server.Versions(ctx); err != nil {
				return err
			}
			var err error
			if cycle, cl, err = server.SysData(ctx, 4096, 64); err != nil {
				return err
			}
			if mtu, err = server.MTU(ctx, 5); err != nil {
				return err
			}
			if gotDest, err = server.HandShake(ctx, sd, true); err != nil {
				return err
			}
			if gotRep, err = server.ExchangeBWReports(ctx, BWReport{}); err != nil {
				return err
			}
			return server.Finish(ctx, sd, true)
		}()
	}()
	clientExchange(t, ctx, client, cd, sd, rep, true)
	// Finish: handshake, then "done" each way (read here so the pipe
	// does not block the server's write).
	if _, err := client.HandShake(ctx, cd, true); err != nil {
		t.Fatal(err)
	}
	done := make([]byte, len(Done))
	if _, err := a.Read(done); err != nil || string(done) != Done {
		t.Fatalf("done: %q %v", done, err)
	}
	wg.Wait()
	if serverErr != nil {
		t.Fatal(serverErr)
	}
	if cycle != 16384 || cl != 128 || mtu != 3 || gotDest != cd || gotRep != rep {
		t.Errorf("server got cycle %d cache line %d mtu %d dest %+v report %+v", cycle, cl, mtu, gotDest, gotRep)
	}
}

// What a C peer writes for the versions and the reports, byte for byte.
func TestCWireBytes(t *testing.T) {
	a, b := net.Pipe()
	server := &Conn{nc: b}
	go func() {
		v := make([]byte, VersionSize)
		copy(v, "5.60")
		a.Write(v)
		io := make([]byte, VersionSize)
		a.Read(io)
	}()
	if err := server.Versions(context.Background()); !errors.Is(err, ErrVersion) {
		t.Errorf("peer 5.60: %v, want ErrVersion", err)
	}
	// A report as xchg_bw_reports writes it on x86: 8-byte big-endian
	// size and iterations, doubles byte-swapped.
	a, b = net.Pipe()
	server = &Conn{nc: b, PeerVersion: 6.06}
	var wire bytes.Buffer
	for _, v := range []uint64{65536, 20, math.Float64bits(1.5), math.Float64bits(2.5), math.Float64bits(0.25)} {
		var x [8]byte
		for i := range x {
			x[i] = byte(v >> (56 - 8*i))
		}
		wire.Write(x[:])
	}
	go func() {
		msg := wire.Bytes()
		for _, n := range []int{8, 8, 8, 8, 8} {
			a.Write(msg[:n])
			msg = msg[n:]
			a.Read(make([]byte, n))
		}
	}()
	got, err := server.ExchangeBWReports(context.Background(), BWReport{})
	if err != nil || got != (BWReport{Size: 65536, Iters: 20, BWPeak: 1.5, BWAvg: 2.5, MsgRate: 0.25}) {
		t.Errorf("report %+v, %v", got, err)
	}
}

// A peer that never answers: the context ends the wait.
func TestExchangeCanceled(t *testing.T) {
	a, b := net.Pipe()
	defer a.Close()
	server := &Conn{nc: b}
	ctx, cancel := context.WithCancel(context.Background())
	errc := make(chan error, 1)
	go func() { errc <- server.Versions(ctx) }()
	cancel()
	select {
	case err := <-errc:
		if !errors.Is(err, context.Canceled) {
			t.Errorf("Versions after cancel: %v", err)
		}
	case <-time.After(time.Minute):
		t.Fatal("Versions did not return after cancel")
	}
}

func TestBW(t *testing.T) {
	// 10 messages of 1 MiB, one every 1 ms, completions signaled every 5:
	// 1000 MB/s on average; the best stretch is the same.
	const n = 10
	posted, completed := make([]int64, n), make([]int64, n)
	for i := range posted {
		posted[i] = int64(i+1) * 1e6 // times since a start before the run
	}
	completed[4], completed[9] = 6e6, 11e6
	r := BW(posted, completed, 1<<20, n, 5, false, false)
	if math.Abs(r.BWAvg-1000) > 1e-9 || math.Abs(r.MsgRate-0.001) > 1e-12 || math.Abs(r.BWPeak-1000) > 1e-9 {
		t.Errorf("BW = %+v", r)
	}
	// -N: only the first post and the last completion count.
	r = BW([]int64{0}, []int64{2e6}, 1<<20, n, 5, true, false)
	if math.Abs(r.BWAvg-5000) > 1e-9 || r.BWPeak != 0 {
		t.Errorf("BW -N = %+v", r)
	}
	var b bytes.Buffer
	WriteBW(&b, BWReport{Size: 65536, Iters: 20, BWPeak: 5.03, BWAvg: 5.03, MsgRate: 0.00008}, false)
	if want := " 65536      20               5.03               5.03   \t\t   0.000080\n"; b.String() != want {
		t.Errorf("WriteBW = %q, want %q", b.String(), want)
	}
}

func TestLat(t *testing.T) {
	// Round trips of 10, 20, ..., 100 µs: halved, the two largest dropped.
	posted := []int64{0}
	for i := 1; i <= 10; i++ {
		posted = append(posted, posted[i-1]+int64(i)*10000)
	}
	s, err := Lat(posted, 2, make([]int64, len(posted)))
	if err != nil {
		t.Fatal(err)
	}
	// Samples 5..40 µs (8 of them) after the tail is dropped.
	if s.Min != 5 || s.Max != 45 || s.Typical != 22.5 || s.Avg != 22.5 || s.P99 != 45 {
		t.Errorf("Lat = %+v", s)
	}
	if _, err := Lat(posted[:4], 2, make([]int64, 4)); err == nil {
		t.Error("Lat accepted 4 iterations")
	}
	var b bytes.Buffer
	WriteLat(&b, 2, 1000, LatStats{1, 2, 3, 4, 5, 6, 7})
	want := " 2       1000          1.00           2.00         3.00     \t       4.00        \t5.00   \t\t6.00    \t\t7.00   \n"
	if b.String() != want {
		t.Errorf("WriteLat = %q, want %q", b.String(), want)
	}
}

// FuzzParseDest: whatever a peer sends, ParseDest returns an address or
// ErrFormat, never panics; what parses formats back to the same fields.
func FuzzParseDest(f *testing.F) {
	for _, d := range []Dest{{}, {LID: 1, OutReads: 16, QPN: 0x11, PSN: 0xabcdef, RKey: 0x1234, VAddr: 0x7f0012345000, GID: testGID}} {
		for _, g := range []bool{false, true} {
			m, _ := MarshalDest(d, g)
			f.Add(m, g)
		}
	}
	f.Add([]byte("0000:0001:0000a3:7e1c2d:0000034d:0000560d0e034000:fe:80:00:00:00:00:00:00:00:00:00:00:00:00:00:01:00000000:\x00xyz"), true)
	f.Fuzz(func(t *testing.T, msg []byte, withGID bool) {
		d, err := ParseDest(msg, withGID)
		if err != nil {
			if !errors.Is(err, ErrFormat) {
				t.Fatalf("error %v is not ErrFormat", err)
			}
			return
		}
		m, err := MarshalDest(d, withGID)
		if err != nil {
			return // wider than the fields: parses, does not format
		}
		d2, err := ParseDest(m, withGID)
		if err != nil || d2 != d {
			t.Fatalf("round trip: %+v -> %q -> %+v, %v", d, m, d2, err)
		}
	})
}

// FuzzParseVersion: any version message parses or is ErrFormat.
func FuzzParseVersion(f *testing.F) {
	f.Add([]byte("6.06\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00"))
	f.Add([]byte("5.70"))
	f.Fuzz(func(t *testing.T, msg []byte) {
		v, err := ParseVersion(msg)
		if err != nil && !errors.Is(err, ErrFormat) {
			t.Fatalf("error %v is not ErrFormat", err)
		}
		if err == nil && (math.IsNaN(v) || v < 0) {
			t.Fatalf("version %v", v)
		}
	})
}

// clientExchange runs a client's side of the exchange up to the reports
// against a server answering with cycle buffer 16384, cache line 128,
// MTU 3 and address sd; withGID is HandShake's.
func clientExchange(t *testing.T, ctx context.Context, client *Conn, cd, sd Dest, rep BWReport, withGID bool) {
	t.Helper()
	if err := client.Versions(ctx); err != nil || client.PeerVersion != 6.06 {
		t.Fatal(err, client.PeerVersion)
	}
	if c, l, err := client.SysData(ctx, 16384, 128); err != nil || c != 16384 || l != 128 {
		t.Fatal(c, l, err)
	}
	if m, err := client.MTU(ctx, 3); err != nil || m != 3 {
		t.Fatal(m, err)
	}
	if got, err := client.HandShake(ctx, cd, withGID); err != nil || got != sd {
		t.Fatal(got, err)
	}
	if _, err := client.ExchangeBWReports(ctx, rep); err != nil {
		t.Fatal(err)
	}
}
