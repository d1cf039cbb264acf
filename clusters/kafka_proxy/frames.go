package main

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// The largest frame the proxy passes on; the broker's own default cap (socket.request.max.bytes)
// is 100 MiB.
const maxFrame = 100 << 20

// apiVersionsKey answers with a v0 response header whatever its version (KIP-511).
const apiVersionsKey = 18

// readFrame returns one size-prefixed Kafka frame, the size included.
func readFrame(r io.Reader) ([]byte, error) {
	var size [4]byte
	if _, err := io.ReadFull(r, size[:]); err != nil {
		return nil, err
	}
	n := int32(binary.BigEndian.Uint32(size[:]))
	if n < 0 || n > maxFrame {
		return nil, fmt.Errorf("frame of %d bytes", n)
	}
	frame := make([]byte, 4+n)
	copy(frame, size[:])
	if _, err := io.ReadFull(r, frame[4:]); err != nil {
		return nil, err
	}
	return frame, nil
}

// header is what a request frame says before its body (request header v1 or v2).
type header struct {
	key, version int16
	correlation  int32
	clientID     string
	body         []byte // the request's body, after the header (and its tagged fields)
}

var errShort = errors.New("request header cut short")

// parseHeader reads a request frame's header. Whether the header carries tagged fields (v2)
// follows from the request's version being flexible, which kmsg knows for every API it has.
func parseHeader(frame []byte) (header, error) {
	b := frame[4:]
	if len(b) < 10 {
		return header{}, errShort
	}
	h := header{
		key:         int16(binary.BigEndian.Uint16(b[0:])),
		version:     int16(binary.BigEndian.Uint16(b[2:])),
		correlation: int32(binary.BigEndian.Uint32(b[4:])),
	}
	idLen := int(int16(binary.BigEndian.Uint16(b[8:])))
	b = b[10:]
	if idLen > 0 {
		if len(b) < idLen {
			return header{}, errShort
		}
		h.clientID = string(b[:idLen])
		b = b[idLen:]
	}
	if req := kmsg.RequestForKey(h.key); req != nil {
		req.SetVersion(h.version)
		if req.IsFlexible() {
			rest, err := skipTags(b)
			if err != nil {
				return header{}, err
			}
			b = rest
		}
	}
	h.body = b
	return h, nil
}

// skipTags skips a tagged-field section: a count, then each tag's number, size and bytes.
func skipTags(b []byte) ([]byte, error) {
	count, n := binary.Uvarint(b)
	if n <= 0 {
		return nil, errShort
	}
	b = b[n:]
	for i := uint64(0); i < count; i++ {
		if _, n = binary.Uvarint(b); n <= 0 {
			return nil, errShort
		}
		b = b[n:]
		size, n := binary.Uvarint(b)
		if n <= 0 || uint64(len(b)-n) < size {
			return nil, errShort
		}
		b = b[n+int(size):]
	}
	return b, nil
}

// decode parses the request's body, or returns nil where kmsg does not know its API or version.
func (h header) decode() kmsg.Request {
	req := kmsg.RequestForKey(h.key)
	if req == nil || h.version > req.MaxVersion() {
		return nil
	}
	req.SetVersion(h.version)
	if unsafe, ok := req.(kmsg.UnsafeReadFrom); ok {
		if unsafe.UnsafeReadFrom(h.body) != nil {
			return nil
		}
	} else if req.ReadFrom(h.body) != nil {
		return nil
	}
	return req
}

// responseFrame encodes `resp` as the answer to the request of `h`: size, correlation id,
// the response header's tagged fields where the response is flexible (never for ApiVersions).
func responseFrame(h header, resp kmsg.Response) []byte {
	frame := make([]byte, 8, 64)
	binary.BigEndian.PutUint32(frame[4:], uint32(h.correlation))
	if resp.IsFlexible() && h.key != apiVersionsKey {
		frame = append(frame, 0)
	}
	frame = resp.AppendTo(frame)
	binary.BigEndian.PutUint32(frame, uint32(len(frame)-4))
	return frame
}

// expectsResponse is false only for a Produce with acks=0, which the broker never answers.
func expectsResponse(h header, req kmsg.Request) bool {
	produce, ok := req.(*kmsg.ProduceRequest)
	return !ok || produce.Acks != 0
}
