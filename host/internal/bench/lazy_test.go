package bench

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/switchboard-mcp/switchboard/internal/fixtures"
)

// BenchmarkLazy compares eager and lazy servers in one run: 100
// configured plugins (host ready = initialize and tools/list answered;
// the idle process tree's RSS), the first call to a lazy plugin end to
// end and later calls on it, and the four built-ins' idle tree RSS and
// PSS.
func BenchmarkLazy(b *testing.B) {
	if b.N < 100 {
		return
	}
	bins := fixtures.Build(b)
	ctx := context.Background()
	var rows []row
	add := func(name, fig, base, ratio string) { rows = append(rows, row{name, fig, base, ratio}) }
	ratio := func(a, b float64) string { return fmt.Sprintf("%.2fx", a/b) }

	var hundred strings.Builder
	for i := 0; i < 100; i++ {
		fmt.Fprintf(&hundred, "plugin \"p%03d\" { path = %q }\n", i, bins.TestPlugin)
	}
	// serve answers once every eager server is up (ready = all 100
	// plugins' tools listed).
	eagerCfg := writeConfigStart(b, "eager", "start_wait = \"10m\"\n"+hundred.String())
	lazyCfg := writeConfigStart(b, "lazy", "start_wait = \"10m\"\n"+hundred.String())
	learnManifests(b, bins.Switchboard, lazyCfg, 100)
	// The kernel tears down the namespaces of 100 sandboxes in the
	// background for a while after their processes exit, and new
	// sandboxes wait for it: let it finish before timing anything.
	time.Sleep(5 * time.Second)

	// First call to a lazy plugin, end to end (its start included), before
	// any eager host has run 100 sandboxes.
	lazy, _ := startMCP(b, nil, bins.Switchboard, "serve", "--config", lazyCfg)
	time.Sleep(time.Second) // past the host's own settling (tuning.SettleDelay)
	var first []time.Duration
	for i := 0; i < 9; i++ {
		t0 := time.Now()
		if err := lazy.echo(fmt.Sprintf("p%03d__echo", i))(ctx); err != nil {
			b.Fatal(err)
		}
		first = append(first, time.Since(t0))
	}

	// The floor: a host with no servers at all, ready.
	var none []time.Duration
	noneCfg := writeConfigStart(b, "lazy", "builtin \"filesystem\" { enabled = false }\nbuiltin \"bash\" { enabled = false }\nbuiltin \"git\" { enabled = false }\nbuiltin \"web\" { enabled = false }\nbuiltin \"switchboard\" { enabled = false }\n")
	for i := 0; i < 4; i++ {
		none = append(none, rawReady(b, nil, bins.Switchboard, noneCfg))
	}

	// Ready time and idle tree RSS, eager against lazy, alternated.
	var eagerReady, lazyReady, lazyGCReady, lazyClientReady []time.Duration
	var eagerRSS, lazyRSS int
	for i := 0; i < 3; i++ {
		if i < 2 { // an eager start of 100 plugins takes long: two rounds
			p, d := startMCP(b, nil, bins.Switchboard, "serve", "--config", eagerCfg)
			eagerReady = append(eagerReady, d)
			if i == 0 {
				eagerRSS, _ = treeMemory(p.cmd.Process.Pid)
			}
			_ = p.c.Close()
			_ = p.cmd.Wait()
		}
		p, d := startMCP(b, nil, bins.Switchboard, "serve", "--config", lazyCfg)
		lazyClientReady = append(lazyClientReady, d)
		if i == 0 {
			lazyRSS, _ = treeMemory(p.cmd.Process.Pid)
		}
		_ = p.c.Close()
		_ = p.cmd.Wait()
		// Ready as the host answers (rawReady), and the same with garbage
		// collection on while it starts (GOGC set: tuning.HostStarting
		// leaves the collector alone), alternated.
		for range 3 {
			lazyGCReady = append(lazyGCReady, rawReady(b, []string{"GOGC=100"}, bins.Switchboard, lazyCfg))
			lazyReady = append(lazyReady, rawReady(b, nil, bins.Switchboard, lazyCfg))
		}
		none = append(none, rawReady(b, nil, bins.Switchboard, noneCfg))
	}
	add("host with no servers: ready (the floor), median", ms(median(none)), "-", "-")
	add("100 plugins: host ready (init + tools/list), median", ms(median(lazyReady))+" lazy", ms(median(eagerReady))+" (eager, 2 runs)", ratio(float64(median(lazyReady)), float64(median(eagerReady))))
	add("the same, as an mcp-go client sees it (its decoding in)", ms(median(lazyClientReady))+" lazy", "-", "-")
	add("100 lazy plugins ready, collection on at start (GOGC=100)", ms(median(lazyGCReady)), ms(median(lazyReady))+" (as shipped)", ratio(float64(median(lazyGCReady)), float64(median(lazyReady))))
	add("100 plugins: idle process tree RSS", mb(lazyRSS)+" lazy", mb(eagerRSS)+" (eager)", ratio(float64(lazyRSS), float64(eagerRSS)))

	// Later calls on the lazily started plugin against the same calls on
	// an eager host.
	eager, _ := startMCP(b, nil, bins.Switchboard, "serve", "--config", eagerCfg)
	st := interleave(b, 2000, 1, 4, eager.echo("p000__echo"), lazy.echo("p000__echo"))
	add("first call to a lazy plugin (median of 9)", ms(median(first)), "-", "-")
	add("later calls, lazily started plugin, p50", us(st[1].p50), us(st[0].p50)+" (eager)", ratio(float64(st[1].p50), float64(st[0].p50)))
	_ = lazy.c.Close()
	_ = eager.c.Close()
	_ = lazy.cmd.Wait()
	_ = eager.cmd.Wait()

	// The four built-ins, idle.
	const four = "builtin \"filesystem\" {}\nbuiltin \"bash\" {}\nbuiltin \"git\" {}\nbuiltin \"web\" {}\n"
	fourEager := writeConfigStart(b, "eager", "start_wait = \"10m\"\n"+four)
	fourLazy := writeConfigStart(b, "lazy", "start_wait = \"10m\"\n"+four)
	learnManifests(b, bins.Switchboard, fourLazy, 4)
	p, _ := startMCP(b, nil, bins.Switchboard, "serve", "--config", fourEager)
	eRSS, ePSS := treeMemory(p.cmd.Process.Pid)
	_ = p.c.Close()
	_ = p.cmd.Wait()
	p, _ = startMCP(b, nil, bins.Switchboard, "serve", "--config", fourLazy)
	lRSS, lPSS := treeMemory(p.cmd.Process.Pid)
	_ = p.c.Close()
	_ = p.cmd.Wait()
	add("four built-ins: idle tree RSS", mb(lRSS)+" lazy", mb(eRSS)+" (eager)", ratio(float64(lRSS), float64(eRSS)))
	add("four built-ins: idle tree PSS", mb(lPSS)+" lazy", mb(ePSS)+" (eager)", ratio(float64(lPSS), float64(ePSS)))

	fmt.Printf("\n%-50s %16s %22s %8s\n", "lazy vs eager (same run)", "figure", "baseline", "ratio")
	for _, r := range rows {
		fmt.Printf("%-50s %16s %22s %8s\n", r.name, r.figure, r.baseline, r.ratio)
	}
	fmt.Printf("\nsummary: 100 plugins lazy: ready %s (target <= 50 ms; a host with no servers takes %s, so 100 lazy plugins add %s), idle tree RSS %s (target <= 40 MB); first lazy call %s (target <= 150 ms)\n",
		ms(median(lazyReady)), ms(median(none)), ms(median(lazyReady)-median(none)), mb(lazyRSS), ms(median(first)))
}

// rawReady starts `switchboard serve --config cfg` and returns how long
// it takes to answer initialize and a tools/list in full, read as lines
// from its stdout: the host's readiness, without an MCP client's decoding
// of the 1,900 tools (an mcp-go client spends as long again on that).
func rawReady(b *testing.B, env []string, switchboard, cfg string) time.Duration {
	b.Helper()
	cmd := exec.Command(switchboard, "serve", "--config", cfg)
	cmd.Env = append(append(os.Environ(), "SWITCHBOARD_LOG_LEVEL=off"), env...)
	in, err := cmd.StdinPipe()
	if err != nil {
		b.Fatal(err)
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		b.Fatal(err)
	}
	t0 := time.Now()
	if err := cmd.Start(); err != nil {
		b.Fatal(err)
	}
	r := bufio.NewReaderSize(out, 1<<20)
	answer := func(msgs string, id string) {
		if _, err := io.WriteString(in, msgs); err != nil {
			b.Fatal(err)
		}
		for {
			line, err := r.ReadBytes('\n')
			if err != nil {
				b.Fatalf("serve: %v", err)
			}
			if bytes.Contains(line, []byte(`"id":`+id+`,`)) || bytes.Contains(line, []byte(`"id":`+id+`}`)) {
				if bytes.Contains(line, []byte(`"error"`)) {
					b.Fatalf("serve answered %s", line)
				}
				return
			}
		}
	}
	answer(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"bench","version":"1"}}}`+"\n", "1")
	answer(`{"jsonrpc":"2.0","method":"notifications/initialized"}`+"\n"+`{"jsonrpc":"2.0","id":2,"method":"tools/list"}`+"\n", "2")
	d := time.Since(t0)
	_ = in.Close()
	_ = cmd.Wait()
	return d
}

// learnManifests runs the host on cfg, which starts every server and
// caches its manifest, until all n are cached (on a loaded machine some
// starts run out of their start_timeout).
func learnManifests(b *testing.B, switchboard, cfg string, n int) {
	b.Helper()
	for try := 0; ; try++ {
		cmd := exec.Command(switchboard, "tools", "--config", cfg)
		cmd.Env = append(os.Environ(), "SWITCHBOARD_LOG_LEVEL=error")
		out, err := cmd.CombinedOutput()
		got, _ := filepath.Glob(filepath.Join(filepath.Dir(cfg), "state", "manifests", "*.manifest"))
		if len(got) >= n {
			return
		}
		if try == 5 {
			b.Fatalf("switchboard tools: %d of %d manifests cached after %d runs (%v)\n%s", len(got), n, try+1, err, out)
		}
	}
}

// treeMemory waits for the process tree under pid to settle (its
// processes stop changing for a second) and returns its total RSS and
// PSS in kB (PSS from /proc/PID/smaps_rollup; 0 for a process whose
// figures cannot be read).
func treeMemory(pid int) (rss, pss int) {
	last := ""
	for i := 0; i < 50; i++ {
		time.Sleep(200 * time.Millisecond)
		now := fmt.Sprint(procTree(pid))
		if now == last && i >= 5 {
			break
		}
		last = now
	}
	for _, p := range procTree(pid) {
		rss += rssKB(p)
		pss += pssKB(p)
	}
	return rss, pss
}

// procTree is pid and all its descendants.
func procTree(pid int) []int { return append([]int{pid}, fixtures.Descendants(pid)...) }

// pssKB reads a process's proportional set size.
func pssKB(pid int) int { return procKB(fmt.Sprintf("/proc/%d/smaps_rollup", pid), "Pss:") }

func mb(kb int) string { return fmt.Sprintf("%.1f MB", float64(kb)/1024) }
