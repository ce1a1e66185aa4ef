package perf

import (
	"context"
	"io"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/goverbs/goverbs/internal/testutil"
	"github.com/goverbs/goverbs/internal/testutil/proc"
	"github.com/goverbs/goverbs/verbs"
)

// allocPort returns a port no other run of this binary used.
func allocPort() int { return testutil.Port() }

// The measured loops allocate nothing: a client in this process runs them
// repeatedly against a server in this process (passive for the bandwidth
// and read tools; for ib_write_lat's ping-pong the server runs as many
// rounds), then both finish the exchange normally.
func TestPerfAllocs(t *testing.T) {
	ctx0 := testutil.Open(t)
	testutil.SkipUnlessModifyConnects(t, ctx0)
	bed := struct {
		ctx       *verbs.Context
		dev, addr string
	}{ctx0, ctx0.Device().Name, testutil.Addr(t)}
	const runs = 3
	for _, name := range []string{"write-bw", "read-bw", "read-lat", "atomic-lat", "atomic-bw", "write-lat"} {
		t.Run(name, func(t *testing.T) {
			if strings.HasPrefix(name, "atomic-") {
				attr, err := bed.ctx.QueryDevice()
				if err != nil {
					t.Fatal(err)
				}
				testutil.SkipUnlessCap(t, attr.AtomicCap != verbs.AtomicNone, "atomic operations (atomic_cap "+attr.AtomicCap.String()+")")
			}
			port := strconv.Itoa(allocPort())
			args := []string{name, "-d", bed.dev, "-p", port, "-n", "20"}
			if !strings.HasPrefix(name, "atomic-") {
				args = append(args, "-s", "64")
			}
			so, _, _, err := parsePerfArgs(args)
			if err != nil {
				t.Fatal(err)
			}
			co, _, _, err := parsePerfArgs(append(args, bed.addr))
			if err != nil {
				t.Fatal(err)
			}
			ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
			defer cancel()
			srv := &perf{o: so, stdout: io.Discard, epoch: time.Now()}
			pingpong := so.test.Lat && so.test.Verb == Write
			errc := make(chan error, 1)
			// The server's own printing and exchange would count as
			// allocations: it reports ready after its setup and waits
			// for the client's measurement to end before going on.
			ready, release := make(chan struct{}), make(chan struct{})
			go func() {
				err := srv.setup(ctx)
				close(ready)
				for i := 0; err == nil && pingpong && i < runs+1; i++ {
					err = srv.iterLatWrite(ctx, so.size)
				}
				if err == nil {
					select {
					case <-release:
						err = srv.measure(ctx)
					case <-ctx.Done():
						err = ctx.Err()
					}
				}
				if cerr := srv.close(); err == nil {
					err = cerr
				}
				errc <- err
			}()
			for !proc.TCPListening(portNum(t, port)) {
				select {
				case err := <-errc:
					t.Fatalf("server ended before listening: %v", err)
				case <-time.After(20 * time.Millisecond):
				}
			}
			cli := &perf{o: co, stdout: io.Discard, epoch: time.Now()}
			defer cli.close()
			if err := cli.setup(ctx); err != nil {
				t.Fatal(err)
			}
			<-ready
			iter := map[string]func(context.Context, uint64) error{
				"write-bw": cli.iterBW, "read-bw": cli.iterBW, "read-lat": cli.iterLatRead, "atomic-lat": cli.iterLatRead, "atomic-bw": cli.iterBW,
				"write-lat": cli.iterLatWrite,
			}[name]
			var iterErr error
			allocs := testing.AllocsPerRun(runs, func() {
				if err := iter(ctx, co.size); err != nil && iterErr == nil {
					iterErr = err
				}
			})
			close(release)
			if iterErr != nil {
				t.Fatal(iterErr)
			}
			if err := cli.measure(ctx); err != nil {
				t.Fatal(err)
			}
			if err := <-errc; err != nil {
				t.Fatalf("server: %v", err)
			}
			if allocs != 0 {
				t.Errorf("%s's measured loop: %v allocations per run, want 0", name, allocs)
			}
		})
	}
}

func portNum(t *testing.T, s string) int {
	n, err := strconv.Atoi(s)
	if err != nil {
		t.Fatal(err)
	}
	return n
}
