// Command bench-valkey is the Go side of `make bench-valkey`: the command
// sequence of valkey's C client tests/rdma/rdma-test, over valkeyrdma (or
// over TCP with -tcp), timed the same way as bench/valkey/build-c.sh's
// timed build of rdma-test. One connection: a PING, then -keys SETs of
// -size-byte random upper-case values, each written in one Write and its
// "+OK" read before the next, then as many GETs, each reply read whole
// and compared with the value. It prints
//
//	BENCH keys set_us get_us
//
// the microseconds the SET loop and the GET loop took. -flush sends one
// FLUSHALL and exits.
package main

import (
	"bytes"
	"context"
	"flag"
	"fmt"
	"io"
	"log"
	"math/rand/v2"
	"net"
	"os"
	"runtime/pprof"
	"strconv"
	"time"

	"github.com/goverbs/goverbs/valkeyrdma"
)

func main() {
	addr := flag.String("addr", "169.254.77.1:6379", "the server's `host:port`")
	useTCP := flag.Bool("tcp", false, "connect over TCP instead of RDMA")
	size := flag.Int("size", 1024, "value size in bytes")
	keys := flag.Int("keys", 1000, "number of keys")
	flush := flag.Bool("flush", false, "send FLUSHALL and exit")
	cpuProfile := flag.String("cpuprofile", "", "write a CPU profile of the SET and GET loops to `file`")
	flag.Parse()
	log.SetFlags(0)
	log.SetPrefix("bench-valkey: ")

	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	var c net.Conn
	var err error
	if *useTCP {
		c, err = new(net.Dialer).DialContext(ctx, "tcp", *addr)
	} else {
		c, err = valkeyrdma.Dial(ctx, "tcp", *addr)
	}
	cancel()
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()
	in := make([]byte, *size+128)

	if *flush {
		roundTrip(c, []byte("*2\r\n$8\r\nFLUSHALL\r\n$4\r\nSYNC\r\n"), in[:5], "+OK\r\n")
		return
	}
	roundTrip(c, []byte("*1\r\n$4\r\nPING\r\n"), in[:7], "+PONG\r\n")

	tid := os.Getpid()
	ks := make([][]byte, *keys)
	vs := make([][]byte, *keys)
	for i := range ks {
		ks[i] = fmt.Appendf(nil, "THREAD%02d-%06d", tid, i)
		v := make([]byte, *size)
		for j := range v {
			v[j] = 'A' + byte(rand.IntN(26))
		}
		vs[i] = v
	}
	out := make([]byte, 0, *size+128)

	if *cpuProfile != "" {
		f, err := os.Create(*cpuProfile)
		if err != nil {
			log.Fatal(err)
		}
		if err := pprof.StartCPUProfile(f); err != nil {
			log.Fatal(err)
		}
		defer func() {
			pprof.StopCPUProfile()
			f.Close()
		}()
	}
	start := time.Now()
	for i := range ks {
		out = appendCmd(out[:0], []byte("SET"), ks[i], vs[i])
		roundTrip(c, out, in[:5], "+OK\r\n")
	}
	setTime := time.Since(start)

	prefix := "$" + strconv.Itoa(*size) + "\r\n"
	start = time.Now()
	for i := range ks {
		out = appendCmd(out[:0], []byte("GET"), ks[i])
		reply := in[:len(prefix)+*size+2]
		if _, err := c.Write(out); err != nil {
			log.Fatal(err)
		}
		if _, err := io.ReadFull(c, reply); err != nil {
			log.Fatal(err)
		}
		if string(reply[:len(prefix)]) != prefix || !bytes.Equal(reply[len(prefix):len(prefix)+*size], vs[i]) {
			log.Fatalf("GET %s: a wrong reply %.40q", ks[i], reply)
		}
	}
	getTime := time.Since(start)
	fmt.Printf("BENCH %d %d %d\n", *keys, setTime.Microseconds(), getTime.Microseconds())
}

// roundTrip writes cmd and reads len(reply) bytes, which must be want.
func roundTrip(c net.Conn, cmd, reply []byte, want string) {
	if _, err := c.Write(cmd); err != nil {
		log.Fatal(err)
	}
	if _, err := io.ReadFull(c, reply); err != nil {
		log.Fatal(err)
	}
	if string(reply) != want {
		log.Fatalf("%q: got %q, want %q", cmd, reply, want)
	}
}

// appendCmd appends args as a RESP array of bulk strings.
func appendCmd(b []byte, args ...[]byte) []byte {
	b = append(b, '*')
	b = strconv.AppendInt(b, int64(len(args)), 10)
	b = append(b, '\r', '\n')
	for _, a := range args {
		b = append(b, '$')
		b = strconv.AppendInt(b, int64(len(a)), 10)
		b = append(b, '\r', '\n')
		b = append(b, a...)
		b = append(b, '\r', '\n')
	}
	return b
}
