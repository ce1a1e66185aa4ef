package valkeyrdma_test

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"net"
	"strconv"
	"sync"
)

// A RESP2 client and server just big enough for the interop tests: the
// library's module takes no Valkey client (examples/valkey uses
// valkey-go).

// respErr is an error reply.
type respErr string

func (e respErr) Error() string { return string(e) }

// respConn reads and writes RESP on a connection.
type respConn struct {
	c net.Conn
	r *bufio.Reader
	w *bufio.Writer
}

func newRESP(c net.Conn) *respConn {
	return &respConn{c: c, r: bufio.NewReaderSize(c, 64<<10), w: bufio.NewWriterSize(c, 64<<10)}
}

// send buffers a command (an array of bulk strings).
func (r *respConn) send(args ...string) {
	fmt.Fprintf(r.w, "*%d\r\n", len(args))
	for _, a := range args {
		fmt.Fprintf(r.w, "$%d\r\n", len(a))
		r.w.WriteString(a)
		r.w.WriteString("\r\n")
	}
}

func (r *respConn) flush() error { return r.w.Flush() }

// do sends one command and reads its reply.
func (r *respConn) do(args ...string) (any, error) {
	r.send(args...)
	if err := r.flush(); err != nil {
		return nil, err
	}
	return r.read()
}

// read reads one reply: a string (simple or bulk), nil (a nil bulk or
// array), an int64, a []any, or an error reply as respErr in the value
// (not the error, which is the connection's).
func (r *respConn) read() (any, error) {
	line, err := r.line()
	if err != nil {
		return nil, err
	}
	if len(line) == 0 {
		return nil, errors.New("resp: empty line")
	}
	switch line[0] {
	case '+':
		return line[1:], nil
	case '-':
		return respErr(line[1:]), nil
	case ':':
		return strconv.ParseInt(line[1:], 10, 64)
	case '$':
		n, err := strconv.Atoi(line[1:])
		if err != nil {
			return nil, err
		}
		if n < 0 {
			return nil, nil
		}
		b := make([]byte, n+2)
		if _, err := io.ReadFull(r.r, b); err != nil {
			return nil, err
		}
		return string(b[:n]), nil
	case '*':
		n, err := strconv.Atoi(line[1:])
		if err != nil {
			return nil, err
		}
		if n < 0 {
			return nil, nil
		}
		a := make([]any, n)
		for i := range a {
			if a[i], err = r.read(); err != nil {
				return nil, err
			}
		}
		return a, nil
	}
	return nil, fmt.Errorf("resp: unknown reply type %q", line)
}

func (r *respConn) line() (string, error) {
	s, err := r.r.ReadString('\n')
	if err != nil {
		return "", err
	}
	if len(s) < 2 || s[len(s)-2] != '\r' {
		return "", fmt.Errorf("resp: line %q does not end in CRLF", s)
	}
	return s[:len(s)-2], nil
}

// readCommand reads a command (an array of bulk strings), for the server.
func (r *respConn) readCommand() ([]string, error) {
	v, err := r.read()
	if err != nil {
		return nil, err
	}
	a, ok := v.([]any)
	if !ok {
		return nil, fmt.Errorf("resp: a command that is not an array: %v", v)
	}
	args := make([]string, len(a))
	for i, x := range a {
		if args[i], ok = x.(string); !ok {
			return nil, fmt.Errorf("resp: a command argument that is not a string: %v", x)
		}
	}
	return args, nil
}

// respServer serves PING, SET, GET and BGSAVE (what valkey's
// tests/rdma/rdma-test sends) from a map, on every connection l accepts,
// until l is closed. A reply is flushed when no more command is
// buffered, so pipelines are answered in batches.
type respServer struct {
	mu    sync.Mutex
	data  map[string]string
	all   []net.Conn // every connection accepted
	conns sync.WaitGroup
	errs  chan error
}

func serveRESP(l net.Listener) *respServer {
	s := &respServer{data: map[string]string{}, errs: make(chan error, 64)}
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			s.mu.Lock()
			s.all = append(s.all, c)
			s.mu.Unlock()
			s.conns.Add(1)
			go s.serve(c)
		}
	}()
	return s
}

func (s *respServer) serve(c net.Conn) {
	defer s.conns.Done()
	defer c.Close()
	r := newRESP(c)
	for {
		args, err := r.readCommand()
		if err != nil {
			if err != io.EOF {
				select {
				case s.errs <- err:
				default:
				}
			}
			return
		}
		switch {
		case len(args) == 1 && args[0] == "PING":
			r.w.WriteString("+PONG\r\n")
		case len(args) == 1 && args[0] == "BGSAVE":
			r.w.WriteString("+Background saving started\r\n")
		case len(args) == 3 && args[0] == "SET":
			s.mu.Lock()
			s.data[args[1]] = args[2]
			s.mu.Unlock()
			r.w.WriteString("+OK\r\n")
		case len(args) == 2 && args[0] == "GET":
			s.mu.Lock()
			v, ok := s.data[args[1]]
			s.mu.Unlock()
			if ok {
				fmt.Fprintf(r.w, "$%d\r\n%s\r\n", len(v), v)
			} else {
				r.w.WriteString("$-1\r\n")
			}
		default:
			fmt.Fprintf(r.w, "-ERR unknown command %q\r\n", args)
		}
		if r.r.Buffered() == 0 {
			if err := r.flush(); err != nil {
				s.errs <- err
				return
			}
		}
	}
}
