package common

// The greeting of 03, 04, 05 and 09 (common-hello.h), and what their
// clients and servers do with it.

import (
	"encoding/binary"

	"github.com/goverbs/goverbs/rpma"
	"github.com/goverbs/goverbs/verbs"
)

// The examples' struct hello_t: enum lang_t lang; char str[1024].
const (
	HelloStrSize   = 1024
	HelloStrOffset = 4
	HelloTSize     = HelloStrOffset + HelloStrSize
)

var helloStr = [2]string{"Hello world!", "¡Hola Mundo!"}

// WriteHello writes greeting lang into a hello_t (write_hello_str).
func WriteHello(h []byte, lang uint32) {
	binary.NativeEndian.PutUint32(h, lang)
	Strncpy(h[HelloStrOffset:HelloTSize-1], helloStr[lang])
	h[HelloTSize-1] = 0
}

// Translate switches a hello_t to the next language (translate).
func (e *Env) Translate(h []byte) {
	e.Printf("translating...\n")
	WriteHello(h, (binary.NativeEndian.Uint32(h)+1)%uint32(len(helloStr)))
}

// HelloText returns the string of a hello_t.
func HelloText(h []byte) string { return CString(h[HelloStrOffset:HelloTSize]) }

// HelloClientMem prepares the client's greeting.
func (e *Env) HelloClientMem() ([]byte, error) {
	e.Eprintf(NoPMem)
	h, err := e.Mem(HelloTSize)
	if err != nil {
		return nil, err
	}
	WriteHello(h, 0)
	return h, nil
}

// HelloServerMem prepares the server's string; its old value, if any, is
// printed.
func (e *Env) HelloServerMem() ([]byte, error) {
	e.Eprintf(NoPMem)
	buf, err := e.Mem(HelloStrSize)
	if err != nil {
		return nil, err
	}
	if buf[0] != 0 {
		e.Printf("Old value: %s\n", CString(buf))
	}
	return buf, nil
}

// CheckWC checks a completion's status and opcode, with the C examples'
// messages.
func (e *Env) CheckWC(wc verbs.WorkCompletion, call string, want verbs.WCOpcode) error {
	if wc.Status != verbs.WCSuccess {
		e.Eprintf("%s() failed: %s\n", call, wc.Status)
		return Exit(-1)
	}
	if wc.Opcode != want {
		e.Eprintf("unexpected wc.opcode value (%d != %d)\n", wc.Opcode, want)
		return Exit(-1)
	}
	return nil
}

// HelloWriteTarget returns the server's region and the offset of its
// string, from the connection's private data, checking there is room for
// the string.
func (e *Env) HelloWriteTarget(conn *rpma.Conn, data *CommonData, what string) (*rpma.RemoteMR, uint64, error) {
	dst, err := e.RemoteMR(data)
	if err != nil {
		return nil, 0, err
	}
	off := uint64(data.DataOffset)
	if dst.Size()-off < HelloStrSize {
		e.Eprintf("%s (%d < %d)\n", what, dst.Size()-off, HelloStrSize)
		return nil, 0, Exit(-1)
	}
	return dst, off, nil
}

// FlushID is the op context of the examples' flushes.
const FlushID = 0xF01D

// Kilobyte is KILOBYTE, the size of the examples' buffers.
const Kilobyte = 1024
