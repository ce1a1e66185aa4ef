// Package rcopy is goverbs rcopy: librdmacm's rcopy
// (librdmacm/examples/rcopy.c, rdma-core 44), a file copy over rsockets
// on the rsocket package. Either end may be the C tool.
//
//	goverbs rcopy [-p port]                             the server
//	goverbs rcopy source server[:destination] [-p port] the client
//
// The server listens on every address, port -p (7427), and serves one
// client after another until it is killed. The client sends the file
// source to the server, which writes it to destination (source's name
// when there is none), with source's mode.
//
// The protocol is rcopy.c's, in the host's byte order as C has it: a
// 16-byte header {u8 version 0, u8 command, u16 length, u32 data, u64
// id}. OPEN carries the mode in data and the path, NUL-padded to
// (strlen+8) rounded down to 8 bytes, after the header; WRITE carries the
// size (u64) and is followed by the file's bytes, sent with one Write;
// CLOSE is the header alone. The server answers each with a header of
// command|0x80 whose data is an errno (0: success).
//
// C's server maps the destination file with mmap and receives into it;
// this one receives into the file in chunks (the bytes written are the
// same). The output is C's: the client prints
// "opening...transferring...closing...done" and "N bytes in S seconds =
// G Gb/sec", the server "waiting for connection...client: ADDR" and
// "opening: PATH, transferring...N bytes...closing...done".
package rcopy

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"strings"
	"syscall"
	"time"

	"github.com/goverbs/goverbs/internal/tools/cmcommon"
	"github.com/goverbs/goverbs/rsocket"
)

// Summary is goverbs rcopy's line in goverbs' command list.
const Summary = "copy a file over rsockets, like rcopy"

// The commands (rcopy.c's enum).
const (
	cmdOpen  = 1
	cmdClose = 2
	cmdWrite = 3
	cmdResp  = 0x80
)

const hdrSize = 16

// hdr is struct msg_hdr.
type hdr struct {
	version, command uint8
	len              uint16
	data             uint32
	id               uint64
}

func (h hdr) marshal(b []byte) []byte {
	b = append(b, h.version, h.command)
	b = binary.NativeEndian.AppendUint16(b, h.len)
	b = binary.NativeEndian.AppendUint32(b, h.data)
	return binary.NativeEndian.AppendUint64(b, h.id)
}

func parseHdr(b []byte) hdr {
	return hdr{version: b[0], command: b[1], len: binary.NativeEndian.Uint16(b[2:]),
		data: binary.NativeEndian.Uint32(b[4:]), id: binary.NativeEndian.Uint64(b[8:])}
}

func usage(out io.Writer) int {
	const prog = "goverbs rcopy"
	fmt.Fprintf(out, "usage 1: %s [options]\n", prog)
	fmt.Fprintf(out, "\t     starts the server application\n")
	fmt.Fprintf(out, "\t[-p  port_number]\n")
	fmt.Fprintf(out, "usage 2: %s source server[:destination] [options]\n", prog)
	fmt.Fprintf(out, "\t     source - file name and path\n")
	fmt.Fprintf(out, "\t     server - name or address\n")
	fmt.Fprintf(out, "\t     destination - file name and path\n")
	fmt.Fprintf(out, "\t[-p  port_number]\n")
	return 1
}

// Main is goverbs rcopy: args are its arguments after the subcommand; it
// returns the exit status.
func Main(args []string, stdout, stderr io.Writer) int {
	port := "7427"
	client := len(args) > 0 && !strings.HasPrefix(args[0], "-")
	if client && len(args) < 2 {
		return usage(stdout)
	}
	opts, _ := cmcommon.Getopt(args, "p:")
	for _, op := range opts {
		if op.Opt != 'p' {
			cmcommon.GetoptError(&cmcommon.Out{W: stderr}, "goverbs rcopy", op)
			return usage(stdout)
		}
		port = op.Arg
	}
	if !client {
		return cmcommon.Exit(server(port, stdout, stderr))
	}
	src, dstAddr := args[0], args[1]
	dst := src
	if i := strings.IndexByte(dstAddr, ':'); i >= 0 {
		dstAddr, dst = dstAddr[:i], dstAddr[i+1:]
	}
	return cmcommon.Exit(clientRun(src, dstAddr, dst, port, stdout, stderr))
}

// --- server

// server is server_run: it never returns but for a failure to listen.
func server(port string, out, errw io.Writer) int {
	l, err := rsocket.Listen("tcp", net.JoinHostPort("", port), rsocket.Backlog(1))
	if err != nil {
		fmt.Fprintf(errw, "rlisten failed: %s\n", cmcommon.Strerror(err))
		return -1
	}
	defer l.Close()
	for {
		fmt.Fprintf(out, "waiting for connection...")
		c, err := l.AcceptContext(context.Background())
		if err != nil {
			fmt.Fprintf(out, "client: \n")
			fmt.Fprintf(errw, "raccept: %s\n", cmcommon.Strerror(err))
			return -1
		}
		ip := ""
		if a, ok := c.RemoteAddr().(*rsocket.Addr); ok {
			ip = a.Addr().String()
		}
		fmt.Fprintf(out, "client: %s\n", ip)
		s := &session{c: c, out: out}
		s.process()
		s.closeFile()
		c.Close() // rshutdown(SHUT_RDWR), rclose
	}
}

// session is one client's connection to the server.
type session struct {
	c   *rsocket.Conn
	out io.Writer
	f   *os.File
	buf []byte
}

// recvHdr is msg_recv_hdr.
func (s *session) recvHdr() (hdr, bool) {
	var b [hdrSize]byte
	if _, err := io.ReadFull(s.c, b[:]); err != nil {
		return hdr{}, false
	}
	h := parseHdr(b[:])
	if h.version != 0 || h.len < hdrSize {
		fmt.Fprintf(s.out, "invalid version %d or length %d\n", h.version, h.len)
		return hdr{}, false
	}
	return h, true
}

// sendResp is msg_send_resp.
func (s *session) sendResp(h hdr, status uint32) {
	r := hdr{command: h.command | cmdResp, len: hdrSize, data: status, id: h.id}
	s.c.Write(r.marshal(make([]byte, 0, hdrSize)))
}

// process is server_process.
func (s *session) process() {
	for {
		h, ok := s.recvHdr()
		if !ok {
			return
		}
		var ret uint32
		switch h.command {
		case cmdOpen:
			ret = s.open(h)
		case cmdClose:
			s.close(h)
		case cmdWrite:
			ret = s.write(h)
		default:
			s.sendResp(h, uint32(syscall.EINVAL))
			ret = 1
		}
		if ret != 0 {
			return
		}
	}
}

func errnoOf(err error, def syscall.Errno) uint32 {
	var en syscall.Errno
	if errors.As(err, &en) {
		return uint32(en)
	}
	return uint32(def)
}

// open is server_open.
func (s *session) open(h hdr) (ret uint32) {
	fmt.Fprintf(s.out, "opening: ")
	defer func() { s.sendResp(h, ret) }()
	if s.f != nil {
		fmt.Fprintf(s.out, "cannot open another file\n")
		return uint32(syscall.EBUSY)
	}
	path := make([]byte, int(h.len)-hdrSize)
	if _, err := io.ReadFull(s.c, path); err != nil {
		fmt.Fprintf(s.out, "error receiving path\n")
		return errnoOf(err, syscall.EIO)
	}
	if i := strings.IndexByte(string(path), 0); i >= 0 {
		path = path[:i]
	}
	fmt.Fprintf(s.out, "%s, ", path)
	f, err := os.OpenFile(string(path), os.O_RDWR|os.O_CREATE|os.O_TRUNC, os.FileMode(h.data&0o777))
	if err != nil {
		fmt.Fprintf(s.out, "unable to open destination file\n")
		return errnoOf(err, syscall.EIO)
	}
	s.f = f
	return 0
}

// close is server_close.
func (s *session) close(h hdr) {
	fmt.Fprintf(s.out, "closing...")
	s.sendResp(h, 0)
	s.closeFile()
	fmt.Fprintf(s.out, "done\n")
}

func (s *session) closeFile() {
	if s.f != nil {
		s.f.Close()
		s.f = nil
	}
}

// write is server_write.
func (s *session) write(h hdr) (ret uint32) {
	fmt.Fprintf(s.out, "transferring")
	defer func() { s.sendResp(h, ret) }()
	if s.f == nil {
		fmt.Fprintf(s.out, "...file not opened\n")
		return uint32(syscall.EINVAL)
	}
	if h.len != hdrSize+8 {
		fmt.Fprintf(s.out, "...invalid message length %d\n", h.len)
		return uint32(syscall.EINVAL)
	}
	var b [8]byte
	if _, err := io.ReadFull(s.c, b[:]); err != nil {
		return errnoOf(err, syscall.EIO)
	}
	bytes := binary.NativeEndian.Uint64(b[:])
	if err := s.f.Truncate(int64(bytes)); err != nil {
		return errnoOf(err, syscall.EIO)
	}
	if bytes == 0 || bytes > 1<<62 { // C's mmap of 0 bytes fails so
		fmt.Fprintf(s.out, "...error mapping file\n")
		return uint32(syscall.EINVAL)
	}
	fmt.Fprintf(s.out, "...%d bytes...", bytes)
	if s.buf == nil {
		s.buf = make([]byte, 1<<20)
	}
	if _, err := io.CopyBuffer(s.f, io.LimitReader(s.c, int64(bytes)), s.buf); err != nil {
		fmt.Fprintf(s.out, "...error receiving data\n")
		return errnoOf(err, syscall.EIO)
	}
	if n, _ := s.f.Seek(0, io.SeekCurrent); uint64(n) != bytes {
		fmt.Fprintf(s.out, "...error receiving data\n")
		return uint32(syscall.EIO)
	}
	return 0
}

// --- client

// getResp is msg_get_resp: the response's status, or -1.
func getResp(c *rsocket.Conn, out io.Writer, cmd uint8) int {
	var b [hdrSize]byte
	if _, err := io.ReadFull(c, b[:]); err != nil {
		return -1
	}
	h := parseHdr(b[:])
	if h.version != 0 || h.len < hdrSize {
		fmt.Fprintf(out, "invalid version %d or length %d\n", h.version, h.len)
		return -1
	}
	if h.len != hdrSize || h.command != cmd|cmdResp {
		fmt.Fprintf(out, "invalid length %d or bad command response %x:%x\n", h.len, h.command, cmd|cmdResp)
		return -1
	}
	return int(int32(h.data))
}

// clientRun is client_run.
func clientRun(src, addr, dst, port string, out, errw io.Writer) int {
	c, err := rsocket.Dial(context.Background(), "tcp", net.JoinHostPort(addr, port))
	if err != nil {
		fmt.Fprintf(errw, "rconnect failed\n: %s\n", cmcommon.Strerror(err))
		return -1
	}
	defer c.Close() // rshutdown(SHUT_RDWR), rclose

	// client_open
	fmt.Fprintf(out, "opening...")
	data, mode, err := readFile(src)
	if err != nil {
		return -1
	}
	plen := (len(dst) + 8) &^ 7
	msg := hdr{command: cmdOpen, len: uint16(hdrSize + plen), data: mode}.marshal(nil)
	msg = append(msg, dst...)
	msg = append(msg, make([]byte, plen-len(dst))...)
	if _, err := c.Write(msg); err != nil {
		return -1
	}
	if ret := getResp(c, out, cmdOpen); ret != 0 {
		return ret
	}

	// client_start_write
	fmt.Fprintf(out, "transferring")
	msg = hdr{command: cmdWrite, len: hdrSize + 8}.marshal(nil)
	msg = binary.NativeEndian.AppendUint64(msg, uint64(len(data)))
	ret := 0
	var d time.Duration
	if _, err := c.Write(msg); err != nil {
		ret = -1
	} else {
		fmt.Fprintf(out, "...")
		start := time.Now()
		if _, err := c.Write(data); err != nil {
			ret = -1
		} else {
			ret = getResp(c, out, cmdWrite)
		}
		d = time.Since(start)
	}

	// client_close
	fmt.Fprintf(out, "closing...")
	msg = hdr{command: cmdClose, len: hdrSize}.marshal(nil)
	if _, err := c.Write(msg); err == nil && getResp(c, out, cmdClose) == 0 {
		fmt.Fprintf(out, "done\n")
	}
	c.Close()
	if ret == 0 {
		usec := float64(d.Microseconds())
		fmt.Fprintf(out, "%d bytes in %.2f seconds = %.2f Gb/sec\n", len(data), usec/1e6, float64(len(data)*8)/(1000*usec))
	}
	return ret
}

// readFile reads the source file and its mode (C maps it).
func readFile(path string) ([]byte, uint32, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, 0, err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return nil, 0, err
	}
	var mode uint32
	if sys, ok := st.Sys().(*syscall.Stat_t); ok {
		mode = sys.Mode
	} else {
		mode = uint32(st.Mode().Perm())
	}
	data, err := io.ReadAll(f)
	return data, mode, err
}
