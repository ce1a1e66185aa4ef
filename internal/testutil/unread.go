package testutil

import (
	"encoding/binary"
	"fmt"
	"os"
	"strconv"
	"strings"
)

// UnreadTCP lists the established IPv4 TCP sockets that have port as
// their local or remote port and hold received bytes nobody has read, as
// "local -> remote: N bytes", from /proc/net/tcp. It lists the kernel's
// own sockets too: siw's connections are kernel sockets that siw reads as
// data arrives, so bytes that stay there are a receive siw dropped
// (docs/providers.md, "siw: who sends first").
func UnreadTCP(port int) []string {
	b, err := os.ReadFile("/proc/net/tcp")
	if err != nil {
		return nil
	}
	return ParseUnreadTCP(string(b), port)
}

// ParseUnreadTCP is UnreadTCP on the text of /proc/net/tcp.
func ParseUnreadTCP(procNetTCP string, port int) []string {
	var out []string
	for _, line := range strings.Split(procNetTCP, "\n")[1:] {
		f := strings.Fields(line)
		if len(f) < 5 || f[3] != "01" { // TCP_ESTABLISHED
			continue
		}
		if hexPort(f[1]) != port && hexPort(f[2]) != port {
			continue
		}
		_, rx, ok := strings.Cut(f[4], ":") // tx_queue:rx_queue
		n, err := strconv.ParseUint(rx, 16, 32)
		if !ok || err != nil || n == 0 {
			continue
		}
		out = append(out, fmt.Sprintf("%s -> %s: %d bytes", hexAddr(f[1]), hexAddr(f[2]), n))
	}
	return out
}

// hexCount decodes a /proc/net/tcp queue length.
func hexCount(s string) string {
	n, err := strconv.ParseUint(s, 16, 32)
	if err != nil {
		return s
	}
	return strconv.FormatUint(n, 10)
}

// hexPort and hexAddr decode /proc/net/tcp's "0100007F:1F90": the
// address is the in-memory __be32 printed as a host-order number.
func hexPort(s string) int {
	_, p, _ := strings.Cut(s, ":")
	n, err := strconv.ParseUint(p, 16, 16)
	if err != nil {
		return -1
	}
	return int(n)
}

func hexAddr(s string) string {
	a, _, _ := strings.Cut(s, ":")
	v, err := strconv.ParseUint(a, 16, 32)
	if err != nil {
		return s
	}
	var ip [4]byte
	binary.NativeEndian.PutUint32(ip[:], uint32(v))
	return fmt.Sprintf("%d.%d.%d.%d:%d", ip[0], ip[1], ip[2], ip[3], hexPort(s))
}

// tcpStates names /proc/net/tcp's st column (include/net/tcp_states.h).
var tcpStates = map[string]string{"01": "ESTABLISHED", "02": "SYN_SENT", "03": "SYN_RECV", "04": "FIN_WAIT1",
	"05": "FIN_WAIT2", "06": "TIME_WAIT", "07": "CLOSE", "08": "CLOSE_WAIT", "09": "LAST_ACK", "0A": "LISTEN", "0B": "CLOSING"}

// TCPSockets lists every IPv4 TCP socket of the network namespace,
// kernel sockets (siw's) included, as "local -> remote STATE" followed by
// the queues' bytes where there are any ("(tx 0 rx 28)": sent and not yet
// acknowledged, received and not read), from /proc/net/tcp: the evidence
// to keep when a connect fails with EADDRNOTAVAIL (a socket holding the
// 4-tuple) or a connection setup times out (a request nobody read).
func TCPSockets() []string {
	b, err := os.ReadFile("/proc/net/tcp")
	if err != nil {
		return []string{err.Error()}
	}
	return ParseTCPSockets(string(b))
}

// TCPTable is TCPSockets as one line per socket, the form a failing test
// logs.
func TCPTable() string {
	return strings.Join(TCPSockets(), "\n")
}

// ParseTCPSockets is TCPSockets on the text of /proc/net/tcp.
func ParseTCPSockets(procNetTCP string) []string {
	var out []string
	for _, line := range strings.Split(procNetTCP, "\n")[1:] {
		f := strings.Fields(line)
		if len(f) < 4 {
			continue
		}
		st, ok := tcpStates[f[3]]
		if !ok {
			st = "state " + f[3]
		}
		line := fmt.Sprintf("%s -> %s %s", hexAddr(f[1]), hexAddr(f[2]), st)
		if len(f) > 4 {
			// tx_queue:rx_queue: bytes not yet acknowledged by the peer,
			// bytes received and not read.
			tx, rx, _ := strings.Cut(f[4], ":")
			if q := fmt.Sprintf("tx %s rx %s", hexCount(tx), hexCount(rx)); q != "tx 0 rx 0" {
				line += " (" + q + ")"
			}
		}
		out = append(out, line)
	}
	return out
}
