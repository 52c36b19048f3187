package control

import (
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
)

// TestPeerPIDFDTracksTheConnectingProcess: the pidfd taken at accept says
// whether the process that connected still exists, so a pid reused after
// it exited cannot pass for it.
func TestPeerPIDFDTracksTheConnectingProcess(t *testing.T) {
	need(t, "curl")
	dir, err := os.MkdirTemp("", "sbpfd")
	if err != nil {
		t.Fatal(err)
	}
	defer os.RemoveAll(dir)
	sock := filepath.Join(dir, "s")
	ln, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	curl := exec.Command("curl", "-s", "-m", "60", "--unix-socket", sock, "http://x/")
	if err := curl.Start(); err != nil {
		t.Fatal(err)
	}
	conn, err := ln.Accept()
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	peer, alive, release, err := peerCred(conn.(*net.UnixConn))
	defer release()
	if err != nil {
		t.Fatal(err)
	}
	if peer.PID != curl.Process.Pid || peer.UID != os.Getuid() {
		t.Errorf("peer = %+v, want pid %d uid %d", peer, curl.Process.Pid, os.Getuid())
	}
	if alive == nil {
		t.Skip("no SO_PEERPIDFD on this kernel")
	}
	if !alive() {
		t.Error("alive() = false while the peer runs")
	}
	_ = curl.Process.Kill()
	_ = curl.Wait()
	if alive() {
		t.Error("alive() = true after the peer exited and was reaped")
	}
}
