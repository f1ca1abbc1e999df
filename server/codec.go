package server

import (
	"context"
	"fmt"
	"sync"
	"unicode/utf8"

	"google.golang.org/grpc"
	"google.golang.org/grpc/encoding"
	"google.golang.org/grpc/mem"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"

	durablev1 "github.com/tinyllm/durable/proto/durable/v1"
)

// gRPC decodes a request before any interceptor or handler sees it, and
// protobuf refuses a string field that is not UTF-8 with an error that names
// no field; gRPC turns it into Internal, which reads as a bug of the daemon
// rather than of the request. requestCodec keeps the refusal but moves it to
// where every other bad field is refused: it decodes as gRPC's proto codec
// does and, when a request of the Durable service holds a string that is not
// UTF-8, finds that field, notes it against the request, and lets
// refuseUndecodable answer InvalidArgument naming it and the byte.
type requestCodec struct {
	encoding.CodecV2
	// undecodable holds the *fieldError of each request decoded with a
	// string that is not UTF-8, until refuseUndecodable takes it.
	undecodable sync.Map // proto.Message → error
}

func newRequestCodec() *requestCodec {
	return &requestCodec{CodecV2: encoding.GetCodecV2("proto")}
}

// Unmarshal decodes as the proto codec does; see requestCodec.
func (c *requestCodec) Unmarshal(data mem.BufferSlice, v any) error {
	err := c.CodecV2.Unmarshal(data, v)
	if err == nil {
		return nil
	}
	m, ok := v.(proto.Message)
	if !ok || m.ProtoReflect().Descriptor().ParentFile().Path() != durablev1.File_durable_v1_durable_proto.Path() {
		return err
	}
	b := data.Materialize()
	bad := invalidUTF8Field(b, m.ProtoReflect().Descriptor(), "")
	if bad == nil {
		return err
	}
	proto.Reset(m)
	c.undecodable.Store(m, bad)
	return nil
}

// refuseUndecodable answers InvalidArgument for a request that
// requestCodec.Unmarshal noted, before anything else looks at it.
func (c *requestCodec) refuseUndecodable(ctx context.Context, req any, _ *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
	if bad, ok := c.undecodable.LoadAndDelete(req); ok {
		fe := bad.(*fieldError)
		return nil, invalidArgument(fe.field, fe.reason)
	}
	return handler(ctx, req)
}

// invalidUTF8Field returns a *fieldError for the first string field of the
// wire message b (of type md) that is not UTF-8, with the path as
// validation spells it (commands[2].activity_id) and the offset of the bad
// byte within the string; nil when there is none or b does not parse.
func invalidUTF8Field(b []byte, md protoreflect.MessageDescriptor, prefix string) *fieldError {
	counts := map[protowire.Number]int{}
	for len(b) > 0 {
		num, typ, n := protowire.ConsumeTag(b)
		if n < 0 {
			return nil
		}
		b = b[n:]
		fd := md.Fields().ByNumber(num)
		if fd == nil || typ != protowire.BytesType {
			n = protowire.ConsumeFieldValue(num, typ, b)
			if n < 0 {
				return nil
			}
			b = b[n:]
			continue
		}
		v, n := protowire.ConsumeBytes(b)
		if n < 0 {
			return nil
		}
		b = b[n:]
		path := field(prefix, string(fd.Name()))
		if fd.IsList() {
			path = index(path, counts[num])
			counts[num]++
		}
		switch {
		case fd.Kind() == protoreflect.StringKind && !utf8.Valid(v):
			at, index := 0, 0
			for at < len(v) {
				r, size := utf8.DecodeRune(v[at:])
				if r == utf8.RuneError && size == 1 {
					break
				}
				at += size
				index++
			}
			return &fieldError{field: path, reason: fmt.Sprintf("must be valid UTF-8: byte 0x%02x at byte offset %d (character %d) is not", v[at], at, index)}
		case fd.Kind() == protoreflect.MessageKind:
			if bad := invalidUTF8Field(v, fd.Message(), path); bad != nil {
				return bad
			}
		}
	}
	return nil
}
