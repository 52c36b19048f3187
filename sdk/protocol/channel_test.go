package protocol

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/switchboard-mcp/switchboard/sdk/pluginv1"
)

// socketPair returns the two ends of a real Unix socket pair, made the way
// AttachCallChannel makes them.
func socketPair(t *testing.T) (host, plugin net.Conn) {
	t.Helper()
	cmd := exec.Command("true")
	host, child, err := AttachCallChannel(cmd)
	if err != nil {
		t.Fatal(err)
	}
	if len(cmd.ExtraFiles) != 1 || !slices.Contains(cmd.Env, EnvCallFD+"=3") {
		t.Fatalf("AttachCallChannel set ExtraFiles %v and Env %v; want one file at fd 3", cmd.ExtraFiles, cmd.Env)
	}
	plugin, err = net.FileConn(child)
	_ = child.Close()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = host.Close(); _ = plugin.Close() })
	return host, plugin
}

// Frames written by many goroutines at once (combined into shared writes)
// arrive whole, each exactly once, including ones far larger than a socket
// buffer.
func TestFramesFromManyWriters(t *testing.T) {
	a, b := socketPair(t)
	w, r := newFrameConn(a), newFrameConn(b)
	const writers, each = 16, 20
	var wg sync.WaitGroup
	for g := 0; g < writers; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < each; i++ {
				id := uint64(g*each + i)
				args := []byte(strings.Repeat("a", int(id%7)*40000))
				if err := w.write(&pluginv1.CallToolRequest{CallId: id, Kind: &pluginv1.CallToolRequest_Call{Call: &pluginv1.Call{Tool: "t" + strconv.Itoa(int(id)), Arguments: args}}}); err != nil {
					t.Error(err)
					return
				}
			}
		}()
	}
	seen := map[uint64]bool{}
	for len(seen) < writers*each {
		req := &pluginv1.CallToolRequest{}
		if err := r.read(req); err != nil {
			t.Fatalf("after %d frames: %v", len(seen), err)
		}
		id := req.GetCallId()
		if seen[id] {
			t.Fatalf("frame %d arrived twice", id)
		}
		seen[id] = true
		if c := req.GetCall(); c.GetTool() != "t"+strconv.Itoa(int(id)) || len(c.GetArguments()) != int(id%7)*40000 {
			t.Fatalf("frame %d arrived damaged: tool %q, %d bytes of arguments", id, c.GetTool(), len(c.GetArguments()))
		}
	}
	wg.Wait()
}

// A frame that announces more than the protocol allows breaks the channel
// instead of allocating what the peer asked for.
func TestOversizedFrameIsRefused(t *testing.T) {
	a, b := socketPair(t)
	var hdr [4]byte
	binary.BigEndian.PutUint32(hdr[:], uint32(maxFrame+1))
	if _, err := a.Write(hdr[:]); err != nil {
		t.Fatal(err)
	}
	err := newFrameConn(b).read(&pluginv1.CallToolEvent{})
	if !errors.Is(err, errFrameTooLarge) {
		t.Fatalf("read = %v, want errFrameTooLarge", err)
	}
}

func TestTakeCallChannel(t *testing.T) {
	t.Setenv(EnvCallFD, "")
	os.Unsetenv(EnvCallFD)
	if c := TakeCallChannel(); c != nil {
		t.Errorf("TakeCallChannel without %s = %v, want nil", EnvCallFD, c)
	}
	for _, bad := range []string{"x", "1", "-4"} {
		t.Setenv(EnvCallFD, bad)
		if c := TakeCallChannel(); c != nil {
			t.Errorf("TakeCallChannel with %s=%s = %v, want nil", EnvCallFD, bad, c)
		}
		if _, ok := os.LookupEnv(EnvCallFD); ok {
			t.Errorf("%s=%s left in the environment", EnvCallFD, bad)
		}
	}
	// A descriptor that is not a socket gives no channel.
	f, err := os.Open(os.DevNull)
	if err != nil {
		t.Fatal(err)
	}
	fd, err := syscall.Dup(int(f.Fd()))
	_ = f.Close()
	if err != nil {
		t.Fatal(err)
	}
	t.Setenv(EnvCallFD, strconv.Itoa(fd))
	if c := TakeCallChannel(); c != nil {
		t.Errorf("TakeCallChannel on /dev/null = %v, want nil", c)
	}

	// The real thing: a socket at the named descriptor becomes a
	// connection, and the inherited descriptor itself is closed.
	host, plugin := socketPair(t)
	// A bare duplicate, owned by nothing but TakeCallChannel (an *os.File
	// would close the number again later, whatever it then names).
	raw, err := plugin.(*net.UnixConn).SyscallConn()
	if err != nil {
		t.Fatal(err)
	}
	pfd := -1
	if err := raw.Control(func(fd uintptr) { pfd, err = syscall.Dup(int(fd)) }); err != nil || pfd < 0 {
		t.Fatal(err)
	}
	t.Setenv(EnvCallFD, strconv.Itoa(pfd))
	conn := TakeCallChannel()
	if conn == nil {
		t.Fatal("TakeCallChannel on a socket = nil")
	}
	defer conn.Close()
	if _, err := os.Stat(fmt.Sprintf("/proc/self/fd/%d", pfd)); err == nil {
		t.Errorf("inherited descriptor %d is still open", pfd)
	}
	if _, err := host.Write([]byte("x")); err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 1)
	if _, err := conn.Read(buf); err != nil || buf[0] != 'x' {
		t.Errorf("read from the taken channel = %q, %v", buf, err)
	}
}

// blockingHandler answers "echo" at once and holds "wait" until cancelled.
type blockingHandler struct{ cancelled chan string }

func (blockingHandler) Configure(context.Context, *pluginv1.ConfigureRequest) error { return nil }
func (blockingHandler) Describe(context.Context) (*pluginv1.DescribeResponse, error) {
	return &pluginv1.DescribeResponse{}, nil
}

func (blockingHandler) PermissionPattern(context.Context, *pluginv1.PermissionPatternRequest) ([]string, error) {
	return nil, nil
}

func (h blockingHandler) CallTool(ctx context.Context, call *pluginv1.Call, events EventSink) (*pluginv1.Result, error) {
	if call.GetTool() == "double" {
		a := string(call.GetArguments())
		return &pluginv1.Result{Content: []*pluginv1.Content{{Kind: &pluginv1.Content_Text{Text: &pluginv1.TextContent{Text: a + a}}}}}, nil
	}
	if call.GetTool() == "echo" {
		events.Progress(&pluginv1.Progress{Message: "working"})
		return &pluginv1.Result{Content: []*pluginv1.Content{{Kind: &pluginv1.Content_Text{Text: &pluginv1.TextContent{Text: string(call.GetArguments())}}}}}, nil
	}
	<-ctx.Done()
	h.cancelled <- call.GetTool()
	return nil, ctx.Err()
}

// Calls, progress, cancellation and the end of the channel, between the
// real client and server code over a real socket pair.
func TestCallsOverTheChannel(t *testing.T) {
	host, plugin := socketPair(t)
	h := blockingHandler{cancelled: make(chan string, 4)}
	srv := newServer(h, plugin)
	done := make(chan struct{})
	go func() { srv.serveChannel(context.Background()); close(done) }()
	c := &Client{CancelGrace: 5 * time.Second, channel: host}
	if c.Transport() != TransportChannel {
		t.Errorf("Transport() = %q before the first call, want %q", c.Transport(), TransportChannel)
	}

	var progress []string
	res, err := c.Call(t.Context(), "echo", []byte(`"hi"`), true, func(ev *pluginv1.CallToolEvent) {
		progress = append(progress, ev.GetProgress().GetMessage())
	})
	if err != nil || res.GetContent()[0].GetText().GetText() != `"hi"` {
		t.Fatalf("echo = %v, %v", res, err)
	}
	if strings.Join(progress, ",") != "working" {
		t.Errorf("progress = %v, want [working]", progress)
	}

	// A cancelled call reaches the handler's context.
	ctx, cancel := context.WithCancel(t.Context())
	time.AfterFunc(50*time.Millisecond, cancel)
	if _, err := c.Call(ctx, "wait", nil, false, nil); !errors.Is(err, ErrCancelled) {
		t.Errorf("cancelled call: err = %v, want ErrCancelled", err)
	}
	if got := <-h.cancelled; got != "wait" {
		t.Errorf("handler saw the cancellation of %q", got)
	}

	// Closing the client ends the channel: calls still running in the
	// plugin are cancelled and the server stops.
	orphan := make(chan error, 1)
	go func() {
		_, err := c.Call(context.Background(), "orphan", nil, false, nil)
		orphan <- err
	}()
	time.Sleep(50 * time.Millisecond)
	_ = c.Close()
	select {
	case got := <-h.cancelled:
		if got != "orphan" {
			t.Errorf("handler saw the cancellation of %q, want orphan", got)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the plugin did not cancel its running call when the channel closed")
	}
	// The caller learns either that the connection went away or, if the
	// plugin's answer got through first, that the call was cancelled.
	if err := <-orphan; !errors.Is(err, ErrUnavailable) && !errors.Is(err, ErrCancelled) {
		t.Errorf("call cut off by Close: err = %v, want ErrUnavailable or ErrCancelled", err)
	}
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		t.Fatal("the plugin's channel server did not stop")
	}
}

// A message over the limit fails its own call with a reason, in either
// direction, and the channel carries on.
func TestOversizedMessagesFailOneCall(t *testing.T) {
	defer func(old int) { maxFrame = old }(maxFrame)
	maxFrame = 64 << 10
	host, plugin := socketPair(t)
	srv := newServer(blockingHandler{cancelled: make(chan string, 4)}, plugin)
	go srv.serveChannel(context.Background())
	c := &Client{CancelGrace: 5 * time.Second, channel: host}
	defer c.Close()

	// The echo handler answers with its arguments: 40 KB in, 40 KB out.
	if _, err := c.Call(t.Context(), "echo", []byte(`"`+strings.Repeat("a", 40<<10)+`"`), false, nil); err != nil {
		t.Fatalf("a call under the limit: %v", err)
	}
	_, err := c.Call(t.Context(), "echo", []byte(`"`+strings.Repeat("a", 100<<10)+`"`), false, nil)
	if !errors.Is(err, ErrInvalidArguments) || !strings.Contains(err.Error(), "exceed the plugin protocol's limit") {
		t.Errorf("arguments over the limit: err = %v, want ErrInvalidArguments naming the limit", err)
	}
	// Arguments under the limit whose answer is over it.
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	_, err = c.Call(ctx, "double", []byte(`"`+strings.Repeat("b", 40<<10)+`"`), false, nil)
	if !errors.Is(err, ErrInternal) || !strings.Contains(err.Error(), "result") || !strings.Contains(err.Error(), "limit") {
		t.Errorf("result over the limit: err = %v, want ErrInternal about the result's size", err)
	}
	if _, err := c.Call(t.Context(), "echo", []byte(`"still fine"`), false, nil); err != nil {
		t.Errorf("a call after the refusals: %v", err)
	}
}

// When the channel breaks but the plugin is still there, the next call
// goes over the CallTool stream instead.
func TestBrokenChannelFallsBackToTheStream(t *testing.T) {
	h := blockingHandler{cancelled: make(chan string, 4)}
	sock := filepath.Join(t.TempDir(), "p.sock")
	l, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	gs := grpc.NewServer()
	pluginv1.RegisterToolServerServer(gs, newServer(h, nil))
	go func() { _ = gs.Serve(l) }()
	defer gs.Stop()
	cc, err := grpc.NewClient("unix://"+sock, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer cc.Close()

	host, plugin := socketPair(t)
	chanSrv := newServer(h, plugin)
	go chanSrv.serveChannel(context.Background())
	c := NewClient(pluginv1.NewToolServerClient(cc))
	c.channel = host
	defer c.Close()

	if _, err := c.Call(t.Context(), "echo", []byte(`"one"`), false, nil); err != nil || c.Transport() != TransportChannel {
		t.Fatalf("first call: %v over %q, want success over the channel", err, c.Transport())
	}
	_ = plugin.Close() // the plugin's end goes away; the plugin itself does not
	deadline := time.Now().Add(5 * time.Second)
	for {
		res, err := c.Call(t.Context(), "echo", []byte(`"two"`), false, nil)
		if err == nil {
			if got := res.GetContent()[0].GetText().GetText(); got != `"two"` || c.Transport() != TransportGRPC {
				t.Fatalf("after the break: %q over %q, want \"two\" over grpc", got, c.Transport())
			}
			return
		}
		// A call racing the break may fail once; the next must not.
		if !errors.Is(err, ErrUnavailable) || time.Now().After(deadline) {
			t.Fatalf("after the break: %v", err)
		}
	}
}
