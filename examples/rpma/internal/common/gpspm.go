package common

// The messages of 09's General Purpose Server Persistency Method
// (GPSPM_flush.proto): protobuf (proto2) messages of required fixed64
// fields, coded here by hand.

import (
	"encoding/binary"
	"errors"
)

// GPSPMFlushRequest is message GPSPM_flush_request.
type GPSPMFlushRequest struct {
	Offset, Length, OpContext uint64 // fields 1, 2 and 3
}

// GPSPMFlushResponse is message GPSPM_flush_response.
type GPSPMFlushResponse struct {
	OpContext uint64 // field 1
}

// pbFixed64 appends a fixed64 field: its key (field number, wire type
// 1) and 8 little-endian bytes.
func pbFixed64(b []byte, field int, v uint64) []byte {
	b = binary.AppendUvarint(b, uint64(field)<<3|1)
	return binary.LittleEndian.AppendUint64(b, v)
}

// Marshal returns the message as protobuf-c packs it.
func (m *GPSPMFlushRequest) Marshal() []byte {
	b := pbFixed64(nil, 1, m.Offset)
	b = pbFixed64(b, 2, m.Length)
	return pbFixed64(b, 3, m.OpContext)
}

// Marshal returns the message as protobuf-c packs it.
func (m *GPSPMFlushResponse) Marshal() []byte { return pbFixed64(nil, 1, m.OpContext) }

var errPB = errors.New("malformed protobuf message")

// pbFixed64Fields decodes a message whose known fields (1..n) are
// fixed64, as protobuf-c's unpack does: unknown fields are skipped, the
// last value of a field wins, a known field of another wire type or a
// missing one (they are all required) is an error.
func pbFixed64Fields(b []byte, n int) ([]uint64, error) {
	vals := make([]uint64, n+1)
	seen := make([]bool, n+1)
	for len(b) > 0 {
		key, k := binary.Uvarint(b)
		if k <= 0 {
			return nil, errPB
		}
		b = b[k:]
		field, wire := key>>3, key&7
		if field == 0 {
			return nil, errPB
		}
		if field <= uint64(n) && wire != 1 {
			return nil, errPB
		}
		switch wire {
		case 0: // varint
			_, k := binary.Uvarint(b)
			if k <= 0 {
				return nil, errPB
			}
			b = b[k:]
		case 1: // 64-bit
			if len(b) < 8 {
				return nil, errPB
			}
			if field <= uint64(n) {
				vals[field], seen[field] = binary.LittleEndian.Uint64(b), true
			}
			b = b[8:]
		case 2: // length-delimited
			l, k := binary.Uvarint(b)
			if k <= 0 || l > uint64(len(b)-k) {
				return nil, errPB
			}
			b = b[k+int(l):]
		case 5: // 32-bit
			if len(b) < 4 {
				return nil, errPB
			}
			b = b[4:]
		default:
			return nil, errPB
		}
	}
	for _, s := range seen[1:] {
		if !s {
			return nil, errPB
		}
	}
	return vals[1:], nil
}

// UnmarshalGPSPMFlushRequest decodes a GPSPM_flush_request as
// protobuf-c's unpack does.
func UnmarshalGPSPMFlushRequest(b []byte) (GPSPMFlushRequest, error) {
	v, err := pbFixed64Fields(b, 3)
	if err != nil {
		return GPSPMFlushRequest{}, err
	}
	return GPSPMFlushRequest{Offset: v[0], Length: v[1], OpContext: v[2]}, nil
}

// UnmarshalGPSPMFlushResponse decodes a GPSPM_flush_response as
// protobuf-c's unpack does.
func UnmarshalGPSPMFlushResponse(b []byte) (GPSPMFlushResponse, error) {
	v, err := pbFixed64Fields(b, 1)
	if err != nil {
		return GPSPMFlushResponse{}, err
	}
	return GPSPMFlushResponse{OpContext: v[0]}, nil
}
