package sandboxinit

import (
	"reflect"
	"strings"
	"testing"
)

func fullSpec() Spec {
	return Spec{
		Path: "/proc/self/fd/3", Args: []string{"/opt/a b/plugin", "", "x:y", "12:ab"}, Binary: "/opt/a b/plugin",
		Namespaces: true, Landlock: true,
		Read: []string{"/usr", "/etc/ssl"}, Write: []string{"/tmp/w:1", "/home/u/p"}, Hide: []string{"/home/u/p/config.hcl"},
		ReadOnly: []string{"/home/u/p/.git"}, Network: true,
		FileSize: 1 << 40, OpenFiles: 1024, CPUSeconds: 1<<64 - 1,
		Env:   map[string]string{"HOME": "/tmp/h", "EMPTY": "", "ODD": "a=b:c\n"},
		Unset: []string{"GOMAXPROCS"}, GateFD: 5, ExtraFDs: 2, PinnedFD: true, ExecOnly: true,
		Exec: []string{"/usr/bin/git"},
	}
}

// A Spec comes back from its encoding as it was, and the encoding holds
// no NUL byte (it travels in an environment variable).
func TestSpecRoundTrip(t *testing.T) {
	for _, sp := range []Spec{fullSpec(), {Path: "/p", Args: []string{"/p"}}} {
		enc := sp.Encode()
		if strings.IndexByte(enc, 0) >= 0 {
			t.Fatalf("encoding holds a NUL byte: %q", enc)
		}
		got, err := DecodeSpec(enc)
		if err != nil {
			t.Fatalf("DecodeSpec(%q): %v", enc, err)
		}
		if !reflect.DeepEqual(got, sp) {
			t.Errorf("round trip:\n got %#v\nwant %#v", got, sp)
		}
	}
}

// Every cut or altered encoding is refused, never half read, and never
// panics.
func TestSpecMalformedIsRefused(t *testing.T) {
	enc := fullSpec().Encode()
	for i := 0; i < len(enc); i++ {
		if _, err := DecodeSpec(enc[:i]); err == nil {
			t.Fatalf("a spec cut at %d of %d bytes was accepted", i, len(enc))
		}
	}
	for _, bad := range []string{"", "x", "3:sb2", enc + "1:x", "3:sb1999999999999:", "3:sb1-1:", "3:sb11:/9:999999999"} {
		if _, err := DecodeSpec(bad); err == nil {
			t.Errorf("DecodeSpec(%q) was accepted", bad)
		}
	}
}

func TestSpawnMessagesRoundTrip(t *testing.T) {
	req := SpawnRequest{
		Path: "/usr/bin/x", Args: []string{"x", "-c", "a b"}, Env: []string{"A=1", "B="}, Dir: "/w",
		Cloneflags: 0x7c020000, AmbientCaps: []uintptr{0, 21, 40}, Setpgid: true, Pdeathsig: 9,
	}
	got, err := decodeRequest(req.Encode())
	if err != nil || !reflect.DeepEqual(got, req) {
		t.Errorf("request round trip: %#v, %v; want %#v", got, err, req)
	}
	b := req.Encode()
	for i := 0; i < len(b); i++ {
		if _, err := decodeRequest(b[:i]); err == nil {
			t.Fatalf("a request cut at %d of %d bytes was accepted", i, len(b))
		}
	}
	for _, r := range []SpawnReply{{PID: 42}, {Error: "fork/exec: no: such file"}, {Exited: 7, Status: 256}} {
		got, err := DecodeReply(r.Encode())
		if err != nil || got != r {
			t.Errorf("reply round trip: %#v, %v; want %#v", got, err, r)
		}
	}
}
