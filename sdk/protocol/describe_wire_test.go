package protocol_test

import (
	"fmt"
	"testing"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"

	"github.com/switchboard-mcp/switchboard/sdk/protocol"
	"github.com/switchboard-mcp/switchboard/sdk/protocol/pluginv1"
	"github.com/switchboard-mcp/switchboard/sdk/protocol/toolcall"
)

// notDescription are the DescribeResponse fields that are not part of a
// server's description: busy is a live answer (launcher.Plugin.Busy).
var notDescription = map[protoreflect.Name]bool{"busy": true}

// fill sets every field of m, and of the messages in it, to a value that
// is not its zero (two entries for each list), so that a conversion that
// drops a field, including one a later protocol version adds, shows.
func fill(m protoreflect.Message, seed *int) {
	fields := m.Descriptor().Fields()
	for i := range fields.Len() {
		fd := fields.Get(i)
		if notDescription[fd.Name()] && m.Descriptor().Name() == "DescribeResponse" {
			continue
		}
		switch {
		case fd.IsList():
			l := m.Mutable(fd).List()
			for range 2 {
				if fd.Kind() == protoreflect.MessageKind {
					e := l.NewElement()
					fill(e.Message(), seed)
					l.Append(e)
				} else {
					l.Append(scalar(fd, seed))
				}
			}
		case fd.IsMap():
			panic(fmt.Sprintf("fill: map field %s: teach the test", fd.FullName()))
		case fd.Kind() == protoreflect.MessageKind:
			fill(m.Mutable(fd).Message(), seed)
		default:
			m.Set(fd, scalar(fd, seed))
		}
	}
}

func scalar(fd protoreflect.FieldDescriptor, seed *int) protoreflect.Value {
	*seed++
	n := *seed
	switch fd.Kind() {
	case protoreflect.StringKind:
		return protoreflect.ValueOfString(fmt.Sprintf("%s-%d", fd.Name(), n))
	case protoreflect.BytesKind:
		return protoreflect.ValueOfBytes(fmt.Appendf(nil, `{"n":%d}`, n))
	case protoreflect.BoolKind:
		return protoreflect.ValueOfBool(true)
	case protoreflect.Int32Kind:
		return protoreflect.ValueOfInt32(int32(n))
	case protoreflect.Int64Kind:
		return protoreflect.ValueOfInt64(int64(n))
	case protoreflect.Uint64Kind:
		return protoreflect.ValueOfUint64(uint64(n))
	case protoreflect.EnumKind:
		vals := fd.Enum().Values()
		return protoreflect.ValueOfEnum(vals.Get(1 + n%(vals.Len()-1)).Number())
	}
	panic(fmt.Sprintf("fill: field %s of kind %v: teach the test", fd.FullName(), fd.Kind()))
}

// TestDescriptionLossless: every field a plugin describes itself with
// reaches the host's description, and the manifest cache's wire form of
// it gives it back whole.
func TestDescriptionLossless(t *testing.T) {
	in := &pluginv1.DescribeResponse{}
	seed := 0
	fill(in.ProtoReflect(), &seed)
	d := protocol.DescriptionFromWire(in)
	back := protocol.DescriptionToWire(d)
	if !proto.Equal(back, in) {
		t.Errorf("DescribeResponse -> Description -> DescribeResponse lost something:\n got %v\nwant %v", back, in)
	}
	if again := protocol.DescriptionFromWire(back); !again.Equal(d) {
		t.Errorf("the description changed on a second trip:\n got %+v\nwant %+v", again, d)
	}
	// Equal sees a change in any one tool field.
	other := protocol.DescriptionFromWire(back)
	no := false
	other.Tools[1].Annotations.OpenWorldHint = &no
	if other.Equal(d) {
		t.Error("Equal missed a changed annotation")
	}
}

// TestDescriptionEqualIgnoresEmptyVersusNil: a server that lists nothing
// is the same whether its lists are nil or empty (a lazy server's cached
// manifest against its live description).
func TestDescriptionEqualIgnoresEmptyVersusNil(t *testing.T) {
	a := &toolcall.Description{Name: "x", Tools: []*toolcall.Tool{{Name: "t", InputSchema: []byte(`{}`)}}}
	b := &toolcall.Description{Name: "x", Tools: []*toolcall.Tool{{Name: "t", InputSchema: []byte(`{}`), OutputSchema: []byte{}}}, Prompts: []*toolcall.Prompt{}, Sandbox: &toolcall.SandboxNeeds{}}
	if !a.Equal(b) {
		t.Error("nil and empty lists compare unequal")
	}
	b.Tools[0].Access = toolcall.AccessRead
	if a.Equal(b) {
		t.Error("a changed access level compares equal")
	}
}
