package main

import (
	"context"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
	"io"

	"google.golang.org/grpc"
	"google.golang.org/grpc/encoding"
)

// The service, written by hand: a grpc.ServiceDesc over plain Go structs and
// a codec of its own, so that the example needs neither protoc nor generated
// code. On the wire it is ordinary gRPC (HTTP/2, length-prefixed messages);
// only the content subtype, "application/grpc+goverbs-echo", says that the
// messages are this codec's and not protobuf.
const (
	serviceName = "goverbs.examples.Echo"
	codecName   = "goverbs-echo"

	methodEcho     = "/" + serviceName + "/Echo"
	methodDigest   = "/" + serviceName + "/Digest"
	methodGenerate = "/" + serviceName + "/Generate"
	methodChat     = "/" + serviceName + "/Chat"
)

// message is the one message type of the service: a sequence number and a
// payload. Its encoding is the number (8 bytes, big-endian) then the
// payload's bytes.
type message struct {
	Seq     uint64
	Payload []byte
}

// errCodec is wrapped by the codec's errors.
var errCodec = errors.New("goverbs-echo codec")

// codec is the encoding.Codec of message.
type codec struct{}

func (codec) Name() string { return codecName }

func (codec) Marshal(v any) ([]byte, error) {
	m, ok := v.(*message)
	if !ok {
		return nil, fmt.Errorf("%w: cannot marshal %T", errCodec, v)
	}
	b := make([]byte, 8+len(m.Payload))
	binary.BigEndian.PutUint64(b, m.Seq)
	copy(b[8:], m.Payload)
	return b, nil
}

func (codec) Unmarshal(data []byte, v any) error {
	m, ok := v.(*message)
	if !ok {
		return fmt.Errorf("%w: cannot unmarshal into %T", errCodec, v)
	}
	if len(data) < 8 {
		return fmt.Errorf("%w: message of %d bytes, shorter than its 8-byte header", errCodec, len(data))
	}
	m.Seq = binary.BigEndian.Uint64(data)
	// gRPC may reuse data once Unmarshal returns: keep a copy.
	m.Payload = append([]byte(nil), data[8:]...)
	return nil
}

func init() { encoding.RegisterCodec(codec{}) }

// echoServer is what the service's implementation provides.
type echoServer interface {
	// Echo returns its request.
	Echo(ctx context.Context, req *message) (*message, error)
	// Digest reads the client's messages to the end and returns the number
	// of payload bytes (in Seq) and their SHA-256 (in Payload).
	Digest(stream grpc.ServerStream) error
	// Generate sends req.Seq messages numbered 0 to req.Seq-1, each with
	// req.Payload.
	Generate(req *message, stream grpc.ServerStream) error
	// Chat sends back each message it receives, as it receives it.
	Chat(stream grpc.ServerStream) error
}

var serviceDesc = grpc.ServiceDesc{
	ServiceName: serviceName,
	HandlerType: (*echoServer)(nil),
	Methods: []grpc.MethodDesc{{
		MethodName: "Echo",
		Handler: func(srv any, ctx context.Context, dec func(any) error, icpt grpc.UnaryServerInterceptor) (any, error) {
			req := new(message)
			if err := dec(req); err != nil {
				return nil, err
			}
			if icpt == nil {
				return srv.(echoServer).Echo(ctx, req)
			}
			info := &grpc.UnaryServerInfo{Server: srv, FullMethod: methodEcho}
			return icpt(ctx, req, info, func(ctx context.Context, req any) (any, error) {
				return srv.(echoServer).Echo(ctx, req.(*message))
			})
		},
	}},
	Streams: []grpc.StreamDesc{
		{
			StreamName:    "Digest",
			ClientStreams: true,
			Handler:       func(srv any, s grpc.ServerStream) error { return srv.(echoServer).Digest(s) },
		},
		{
			StreamName:    "Generate",
			ServerStreams: true,
			Handler: func(srv any, s grpc.ServerStream) error {
				req := new(message)
				if err := s.RecvMsg(req); err != nil {
					return err
				}
				return srv.(echoServer).Generate(req, s)
			},
		},
		{
			StreamName:    "Chat",
			ClientStreams: true,
			ServerStreams: true,
			Handler:       func(srv any, s grpc.ServerStream) error { return srv.(echoServer).Chat(s) },
		},
	},
}

// service implements echoServer.
type service struct{}

func (service) Echo(_ context.Context, req *message) (*message, error) { return req, nil }

func (service) Digest(stream grpc.ServerStream) error {
	h := sha256.New()
	var n uint64
	for {
		m := new(message)
		err := stream.RecvMsg(m)
		if err == io.EOF {
			break
		}
		if err != nil {
			return err
		}
		h.Write(m.Payload)
		n += uint64(len(m.Payload))
	}
	return stream.SendMsg(&message{Seq: n, Payload: h.Sum(nil)})
}

func (service) Generate(req *message, stream grpc.ServerStream) error {
	for i := range req.Seq {
		if err := stream.SendMsg(&message{Seq: i, Payload: req.Payload}); err != nil {
			return err
		}
	}
	return nil
}

func (service) Chat(stream grpc.ServerStream) error {
	for {
		m := new(message)
		err := stream.RecvMsg(m)
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return err
		}
		if err := stream.SendMsg(m); err != nil {
			return err
		}
	}
}

// client calls the service over a grpc.ClientConn.
type client struct{ cc grpc.ClientConnInterface }

func (c client) Echo(ctx context.Context, req *message) (*message, error) {
	resp := new(message)
	if err := c.cc.Invoke(ctx, methodEcho, req, resp); err != nil {
		return nil, err
	}
	return resp, nil
}

// Digest sends payloads and returns the server's count and SHA-256 of them.
func (c client) Digest(ctx context.Context, payloads [][]byte) (*message, error) {
	s, err := c.cc.NewStream(ctx, &serviceDesc.Streams[0], methodDigest)
	if err != nil {
		return nil, err
	}
	for i, p := range payloads {
		if err := s.SendMsg(&message{Seq: uint64(i), Payload: p}); err != nil {
			return nil, err
		}
	}
	if err := s.CloseSend(); err != nil {
		return nil, err
	}
	resp := new(message)
	if err := s.RecvMsg(resp); err != nil {
		return nil, err
	}
	return resp, nil
}

// Generate asks for n messages carrying payload and calls f with each.
func (c client) Generate(ctx context.Context, n uint64, payload []byte, f func(*message) error) error {
	s, err := c.cc.NewStream(ctx, &serviceDesc.Streams[1], methodGenerate)
	if err != nil {
		return err
	}
	if err := s.SendMsg(&message{Seq: n, Payload: payload}); err != nil {
		return err
	}
	if err := s.CloseSend(); err != nil {
		return err
	}
	for {
		m := new(message)
		err := s.RecvMsg(m)
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return err
		}
		if err := f(m); err != nil {
			return err
		}
	}
}

// Chat sends every payload while receiving the echoes, and returns them.
func (c client) Chat(ctx context.Context, payloads [][]byte) ([]*message, error) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	s, err := c.cc.NewStream(ctx, &serviceDesc.Streams[2], methodChat)
	if err != nil {
		return nil, err
	}
	sent := make(chan error, 1)
	go func() {
		for i, p := range payloads {
			if err := s.SendMsg(&message{Seq: uint64(i), Payload: p}); err != nil {
				sent <- err
				return
			}
		}
		sent <- s.CloseSend()
	}()
	var got []*message
	for {
		m := new(message)
		err := s.RecvMsg(m)
		if err == io.EOF {
			break
		}
		if err != nil {
			cancel()
			<-sent
			return got, err
		}
		got = append(got, m)
	}
	if err := <-sent; err != nil && err != io.EOF {
		return got, err
	}
	return got, nil
}
