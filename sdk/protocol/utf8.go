package protocol

import (
	"strings"
	"unicode/utf8"

	"google.golang.org/grpc/encoding"
	grpcproto "google.golang.org/grpc/encoding/proto"
	"google.golang.org/grpc/mem"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
)

// invalidUTF8 reports whether err is protobuf refusing to marshal a
// message because a string field holds bytes that are not UTF-8 (protobuf
// has no error value to compare against).
func invalidUTF8(err error) bool {
	return err != nil && strings.Contains(err.Error(), "invalid UTF-8")
}

// validUTF8Codec is gRPC's protobuf codec, except that a message it
// refuses because a string is not UTF-8 is sent with that string made
// valid (toValidUTF8). A tool's text may come from anywhere (a file name,
// a line of Latin-1); protobuf refuses such a string, and gRPC then ends
// the whole stream, so one such line in a grep lost every call on the
// stream (found from outside). A message that marshals costs nothing more.
type validUTF8Codec struct{ encoding.CodecV2 }

// Marshal implements encoding.CodecV2.
func (c validUTF8Codec) Marshal(v any) (mem.BufferSlice, error) {
	out, err := c.CodecV2.Marshal(v)
	if !invalidUTF8(err) {
		return out, err
	}
	m, ok := v.(proto.Message)
	if !ok {
		return out, err
	}
	m = proto.Clone(m)
	toValidUTF8(m.ProtoReflect())
	return c.CodecV2.Marshal(m)
}

// utf8Codec is the codec both ends of the plugin connection use.
var utf8Codec = validUTF8Codec{encoding.GetCodecV2(grpcproto.Name)}

// toValidUTF8 replaces, in m and the messages inside it, every string that
// is not valid UTF-8 with its valid part, each invalid byte sequence
// becoming U+FFFD. A tool's text may come from anywhere (a file name or a
// line in Latin-1); protobuf refuses to send such a string, which lost the
// whole result.
func toValidUTF8(m protoreflect.Message) {
	m.Range(func(fd protoreflect.FieldDescriptor, v protoreflect.Value) bool {
		switch {
		case fd.IsList():
			l := v.List()
			for i := range l.Len() {
				switch fd.Kind() {
				case protoreflect.StringKind:
					if s := l.Get(i).String(); !utf8.ValidString(s) {
						l.Set(i, protoreflect.ValueOfString(strings.ToValidUTF8(s, "\uFFFD")))
					}
				case protoreflect.MessageKind, protoreflect.GroupKind:
					toValidUTF8(l.Get(i).Message())
				}
			}
		case fd.IsMap():
			mp := v.Map()
			mp.Range(func(k protoreflect.MapKey, mv protoreflect.Value) bool {
				switch fd.MapValue().Kind() {
				case protoreflect.StringKind:
					if s := mv.String(); !utf8.ValidString(s) {
						mp.Set(k, protoreflect.ValueOfString(strings.ToValidUTF8(s, "\uFFFD")))
					}
				case protoreflect.MessageKind, protoreflect.GroupKind:
					toValidUTF8(mv.Message())
				}
				return true
			})
		case fd.Kind() == protoreflect.StringKind:
			if s := v.String(); !utf8.ValidString(s) {
				m.Set(fd, protoreflect.ValueOfString(strings.ToValidUTF8(s, "\uFFFD")))
			}
		case fd.Kind() == protoreflect.MessageKind || fd.Kind() == protoreflect.GroupKind:
			toValidUTF8(v.Message())
		}
		return true
	})
}
