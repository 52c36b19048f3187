package main

import (
	"bufio"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/mark3labs/mcp-go/client"

	"github.com/switchboard-mcp/switchboard/host/internal/sharedstore/pgtest"
	"github.com/switchboard-mcp/switchboard/internal/fixtures"
)

// replica is one `switchboard serve --http` host of the replica test.
type replica struct {
	cmd  *exec.Cmd
	addr string // 127.0.0.1:PORT
	data string // its data_dir
}

func (r replica) url() string { return "http://" + r.addr + "/mcp" }

// startReplica starts `serve --http 127.0.0.1:0` on config with its own
// data_dir (as on its own machine) and the store's DSN in the environment
// the config reads it from. --allow-remote: behind a proxy the Host
// header names the proxy's address, not the host's.
func startReplica(t *testing.T, switchboard, config, dsn string) replica {
	t.Helper()
	cmd := exec.Command(switchboard, "serve", "--config", config, "--http", "127.0.0.1:0", "--allow-remote")
	data := filepath.Join(t.TempDir(), "state")
	cmd.Env = append(os.Environ(), "SWITCHBOARD_LOG_LEVEL=warn", "SB_DATA="+data, "SB_STORE="+dsn)
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	sc := bufio.NewScanner(stderr)
	var lines []string
	for sc.Scan() {
		if u, ok := strings.CutPrefix(sc.Text(), "switchboard: serving MCP at http://"); ok {
			go func() {
				for sc.Scan() {
				}
			}()
			return replica{cmd: cmd, addr: strings.TrimSuffix(u, "/mcp"), data: data}
		}
		lines = append(lines, sc.Text())
	}
	t.Fatalf("the host did not start serving:\n%s", strings.Join(lines, "\n"))
	return replica{}
}

// freePort is a loopback port nothing listens on (for HAProxy's frontend).
func freePort(t *testing.T) int {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port
}

// startHAProxy runs HAProxy in the foreground on 127.0.0.1:port, round
// robin over the hosts, each checked on /readyz every 200 ms.
func startHAProxy(t *testing.T, haproxy string, port int, hosts ...replica) {
	t.Helper()
	var servers strings.Builder
	for i, h := range hosts {
		fmt.Fprintf(&servers, "  server host%d %s check\n", i, h.addr)
	}
	cfg := fmt.Sprintf(`global
  maxconn 512
defaults
  mode http
  timeout connect 2s
  timeout client 60s
  timeout server 60s
  retries 3
  option redispatch
frontend mcp
  bind 127.0.0.1:%d
  default_backend hosts
backend hosts
  balance roundrobin
  option httpchk GET /readyz
  http-check expect status 200
  default-server inter 200ms fall 2 rise 1
%s`, port, servers.String())
	path := filepath.Join(t.TempDir(), "haproxy.cfg")
	if err := os.WriteFile(path, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command(haproxy, "-c", "-q", "-f", path).CombinedOutput(); err != nil {
		t.Fatalf("haproxy -c: %v\n%s", err, out)
	}
	cmd := exec.Command(haproxy, "-db", "-f", path)
	var log strings.Builder
	cmd.Stdout, cmd.Stderr = &log, &log
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	// Up when it proxies a probe.
	deadline := time.Now().Add(20 * time.Second)
	for {
		if code, _ := httpGet(fmt.Sprintf("http://127.0.0.1:%d/readyz", port)); code == http.StatusOK {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("HAProxy does not answer on port %d", port)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func httpGet(url string) (int, string) {
	resp, err := http.Get(url) //nolint:gosec // a test's loopback URL
	if err != nil {
		return 0, err.Error()
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// modernClient is an mcp-go client over streamable HTTP in the 2026-07-28
// era (the client's default: no sessions, so any replica can serve any
// request), eliciting through el when set.
func modernClient(t *testing.T, url string, el *elicitor) *client.Client {
	t.Helper()
	var opts []client.ClientOption
	if el != nil {
		opts = append(opts, client.WithElicitationHandler(el))
	}
	c, err := client.NewStreamableHttpClient(url)
	if err != nil {
		t.Fatal(err)
	}
	for _, o := range opts {
		o(c)
	}
	t.Cleanup(func() { _ = c.Close() })
	if err := c.Start(t.Context()); err != nil {
		t.Fatal(err)
	}
	initialize(t, c)
	return c
}

// TestReplicas: two hosts on one config share a PostgreSQL store behind
// HAProxy. Calls run through HAProxy in the 2026-07-28 era while one host
// is SIGKILLed; then every call that got an answer is in the shared audit
// log, "always" answers given on one host are honoured by the other, and
// the survivor keeps serving.
func TestReplicas(t *testing.T) {
	haproxy, err := exec.LookPath("haproxy")
	if err != nil {
		t.Skip("HAProxy is not installed: apt-get install haproxy (.ci/run installs it)")
	}
	pg := pgtest.Start(t)
	dsn := pg.CreateDB(t, "replicas")
	bins := fixtures.Build(t)
	dir := t.TempDir()
	if err := os.Mkdir(filepath.Join(dir, "project"), 0o755); err != nil {
		t.Fatal(err)
	}
	config := filepath.Join(dir, "config.hcl")
	if err := os.WriteFile(config, fmt.Appendf(nil, `
project_dir = "project"
data_dir    = env("SB_DATA")
start_wait  = "2m"
plugin "fx" { path = %q }
permissions {
  default = "ask"
  allow   = ["fx.echo"]
}
store { postgres = env("SB_STORE") }
`, bins.TestPlugin), 0o600); err != nil {
		t.Fatal(err)
	}
	a := startReplica(t, bins.Switchboard, config, dsn)
	b := startReplica(t, bins.Switchboard, config, dsn)
	for _, h := range []replica{a, b} {
		if code, body := httpGet("http://" + h.addr + "/healthz"); code != http.StatusOK {
			t.Fatalf("%s/healthz = %d %q", h.addr, code, body)
		}
		if code, body := httpGet("http://" + h.addr + "/readyz"); code != http.StatusOK || body != "ready\n" {
			t.Fatalf("%s/readyz = %d %q", h.addr, code, body)
		}
	}
	port := freePort(t)
	startHAProxy(t, haproxy, port, a, b)
	lb := fmt.Sprintf("http://127.0.0.1:%d/mcp", port)

	t.Run("a decision made on one host is honoured by the other", func(t *testing.T) {
		elA, elB := &elicitor{}, &elicitor{}
		onA, onB := modernClient(t, a.url(), elA), modernClient(t, b.url(), elB)
		elA.will("always_deny")
		if got, isErr := mustCall(t, onA, "fx__env", nil); !isErr || !strings.Contains(got, "from now on") {
			t.Fatalf("always deny on host A = %q (isError %v)", got, isErr)
		}
		if got, isErr := mustCall(t, onB, "fx__env", nil); !isErr || !strings.Contains(got, `"fx.env"`) || !strings.Contains(got, "saved") {
			t.Errorf("host B after host A's \"always deny\" = %q (isError %v), want the saved rule's refusal", got, isErr)
		}
		elB.will("always_allow")
		if got, isErr := mustCall(t, onB, "fx__clock", nil); isErr || got == "" {
			t.Fatalf("always allow on host B = %q (isError %v)", got, isErr)
		}
		if got, isErr := mustCall(t, onA, "fx__clock", nil); isErr || got == "" {
			t.Errorf("host A after host B's \"always allow\" = %q (isError %v)", got, isErr)
		}
		if n := elA.count(); n != 1 {
			t.Errorf("host A asked %d times, want 1: host B's \"always allow\" must count there", n)
		}
		if n := elB.count(); n != 1 {
			t.Errorf("host B asked %d times, want 1: host A's \"always deny\" must count there", n)
		}
	})

	// Calls through HAProxy: each worker calls fx.echo with a text of its
	// own and keeps those the client got an answer for.
	const workers = 4
	var (
		mu        sync.Mutex
		answered  []string
		failed    atomic.Int64
		killed    atomic.Bool
		afterKill atomic.Int64
	)
	ctx, stop := context.WithTimeout(t.Context(), 45*time.Second)
	defer stop()
	var wg sync.WaitGroup
	for w := range workers {
		c := modernClient(t, lb, nil)
		wg.Go(func() {
			for i := 0; ctx.Err() == nil; i++ {
				text := fmt.Sprintf("w%d-%d", w, i)
				res, err := callTool(ctx, c, "fx__echo", map[string]any{"text": text}, nil)
				if err != nil || res.IsError || resultText(res) != text {
					failed.Add(1)
					continue
				}
				mu.Lock()
				answered = append(answered, text)
				mu.Unlock()
				if killed.Load() && afterKill.Add(1) >= 60 {
					stop()
				}
			}
		})
	}
	// SIGKILL host A once calls flow through both hosts.
	for {
		mu.Lock()
		n := len(answered)
		mu.Unlock()
		if n >= 40 || ctx.Err() != nil {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	if err := a.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	killed.Store(true)
	wg.Wait()
	t.Logf("%d calls answered, %d failed (those in flight to the killed host), %d answered after the kill", len(answered), failed.Load(), afterKill.Load())
	if afterKill.Load() < 60 {
		t.Fatalf("the survivor answered %d calls through HAProxy after the kill within the time, want 60", afterKill.Load())
	}

	// Every answered call is in the shared audit, once, and both hosts
	// answered some of them.
	pool, err := pgxpool.New(t.Context(), dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	rows, err := pool.Query(t.Context(), `SELECT record->>'args_sha256', host FROM switchboard_audit WHERE tool = 'fx.echo' AND outcome = 'ok'`)
	if err != nil {
		t.Fatal(err)
	}
	inAudit := map[string]int{}
	byHost := map[string]int{}
	for rows.Next() {
		var sum, host string
		if err := rows.Scan(&sum, &host); err != nil {
			t.Fatal(err)
		}
		inAudit[sum]++
		byHost[host]++
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	lost := 0
	for _, text := range answered {
		args, _ := json.Marshal(map[string]any{"text": text})
		sum := sha256.Sum256(args)
		if n := inAudit[hex.EncodeToString(sum[:])]; n != 1 {
			lost++
			if lost <= 5 {
				t.Errorf("answered call %s is in the shared audit %d times, want 1", text, n)
			}
		}
	}
	if lost > 0 {
		t.Errorf("%d of %d answered calls are not in the shared audit once", lost, len(answered))
	}
	pidA, pidB := ":"+strconv.Itoa(a.cmd.Process.Pid), ":"+strconv.Itoa(b.cmd.Process.Pid)
	var fromA, fromB int
	for host, n := range byHost {
		switch {
		case strings.HasSuffix(host, pidA):
			fromA += n
		case strings.HasSuffix(host, pidB):
			fromB += n
		}
	}
	if fromA == 0 || fromB == 0 {
		t.Errorf("audit rows by host = %v: want calls answered by both host A (pid %d) and host B (pid %d)", byHost, a.cmd.Process.Pid, b.cmd.Process.Pid)
	}

	// The database goes away: the survivor says it is not ready (the load
	// balancer stops sending it calls), and a call sent to it anyway is
	// refused saying why; its record is kept in the local audit file.
	pg.Stop(t)
	deadline := time.Now().Add(20 * time.Second)
	for {
		code, body := httpGet("http://" + b.addr + "/readyz")
		if code == http.StatusServiceUnavailable && strings.Contains(body, "shared store") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("/readyz with the database down = %d %q, want 503 naming the shared store", code, body)
		}
		time.Sleep(100 * time.Millisecond)
	}
	if code, _ := httpGet("http://" + b.addr + "/healthz"); code != http.StatusOK {
		t.Errorf("/healthz with the database down = %d, want 200 (the process is alive)", code)
	}
	onB := modernClient(t, b.url(), nil)
	if got, isErr := mustCall(t, onB, "fx__echo", map[string]any{"text": "db down"}); !isErr || !strings.Contains(got, "shared store") {
		t.Errorf("a call with the database down = %q (isError %v), want a refusal naming the shared store", got, isErr)
	}
	if log, err := os.ReadFile(filepath.Join(b.data, "audit.jsonl")); err != nil || !strings.Contains(string(log), `"tool":"fx.echo"`) {
		t.Errorf("local audit file with the database down = %q, %v; want the refused call's record", log, err)
	}
}

// A store block with a connection string that does not parse fails
// validate at its line; one whose database does not answer stops serve
// before anything starts, saying what to check, without the password.
func TestStoreRefusals(t *testing.T) {
	e := setupWith(t, `store { postgres = "postgres://sb:s3cret@db.internal:notaport/sb" }`)
	_, errOut, code := run(t, e, "validate", "--config", e.config)
	// (The snippet quotes the config's own line; the message masks it.)
	if code != 1 || !strings.Contains(errOut, "config.hcl:15:9") || !strings.Contains(errOut, "Invalid store postgres") || !strings.Contains(errOut, "postgres://sb:xxxxx@") {
		t.Errorf("validate with a bad connection string: exit %d\n%s", code, errOut)
	}

	dead := t.TempDir() // no server listens here
	e = setupWith(t, fmt.Sprintf(`store { postgres = "host=%s port=5432 user=sb password=s3cret dbname=sb connect_timeout=5" }`, dead))
	if _, errOut, code := run(t, e, "validate", "--config", e.config); code != 0 {
		t.Fatalf("validate checks the shape only: exit %d\n%s", code, errOut)
	}
	_, errOut, code = run(t, e, "serve", "--config", e.config, "--http", "127.0.0.1:0")
	for _, want := range []string{"did not answer", "check the store block's postgres connection string"} {
		if code != 2 || !strings.Contains(errOut, want) {
			t.Errorf("serve with an unreachable store: exit %d, want 2 and %q in\n%s", code, want, errOut)
		}
	}
	if strings.Contains(errOut, "s3cret") {
		t.Errorf("serve's refusal shows the password:\n%s", errOut)
	}
}
