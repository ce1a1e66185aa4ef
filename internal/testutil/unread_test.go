package testutil

import (
	"slices"
	"testing"
)

// Established sockets of the port with unread bytes, from the text of
// /proc/net/tcp.
func TestParseUnreadTCP(t *testing.T) {
	text := `  sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode
   0: 034DFEA9:1DCB 00000000:0000 0A 00000000:00000000 00:00000000 00000000     0        0 0 1 0000000000000000 100 0 0 10 0
   1: 034DFEA9:C350 034DFEA9:1DCB 01 00000000:0000002C 00:00000000 00000000     0        0 0 1 0000000000000000 20 4 30 10 -1
   2: 034DFEA9:1DCB 034DFEA9:C350 01 00000000:00000000 00:00000000 00000000     0        0 0 1 0000000000000000 20 4 30 10 -1
   3: 034DFEA9:1DCC 034DFEA9:C351 01 00000000:00000010 00:00000000 00000000     0        0 0 1 0000000000000000 20 4 30 10 -1
`
	got := ParseUnreadTCP(text, 7627)
	if want := []string{"169.254.77.3:50000 -> 169.254.77.3:7627: 44 bytes"}; !slices.Equal(got, want) {
		t.Errorf("got %q, want %q", got, want)
	}
}

func TestParseTCPSockets(t *testing.T) {
	text := `  sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode
   0: 034DFEA9:1DCB 00000000:0000 0A 00000000:00000000 00:00000000 00000000     0        0 0 1 0000000000000000 100 0 0 10 0
   1: 034DFEA9:C350 034DFEA9:1DCB 06 00000000:00000000 03:00001770 00000000     0        0 0 3 0000000000000000
   2: 034DFEA9:1DCB 034DFEA9:C350 0C 00000000:0000001C 00:00000000 00000000     0        0 0 1 0000000000000000 20 4 30 10 -1
`
	want := []string{"169.254.77.3:7627 -> 0.0.0.0:0 LISTEN", "169.254.77.3:50000 -> 169.254.77.3:7627 TIME_WAIT",
		"169.254.77.3:7627 -> 169.254.77.3:50000 state 0C (tx 0 rx 28)"}
	if got := ParseTCPSockets(text); !slices.Equal(got, want) {
		t.Errorf("got %q, want %q", got, want)
	}
}
