package bench

import (
	"fmt"
	"testing"
	"time"

	"github.com/switchboard-mcp/switchboard/internal/fixtures"
)

// BenchmarkSandbox measures what the kernel sandbox costs a user, in one
// run: start-up of the four built-ins and of one plugin, and the p50 of a
// call, each confined (the default) and with sandbox { mode = "off" }.
// Targets: at most 10 ms more per plugin start, call p50 within 5 %.
func BenchmarkSandbox(b *testing.B) {
	if b.N < 100 {
		return
	}
	bins := fixtures.Build(b)
	// The host as make build makes it (built-ins served through
	// switchboard-builtins), and for the ablation rows one without it
	// beside, which re-executes itself for each built-in.
	host, unpinned := bins.Switchboard, fixtures.Unpinned(b)
	off := "\n  sandbox {\n    mode = \"off\"\n  }\n"
	four := func(extra string) string {
		return writeConfig(b, "builtin \"filesystem\" {"+extra+"}\nbuiltin \"bash\" {"+extra+"}\nbuiltin \"git\" {"+extra+"}\nbuiltin \"web\" {"+extra+"}\n")
	}
	one := func(extra string) string {
		return writeConfig(b, fmt.Sprintf("plugin \"fx\" {\n  path = %q\n%s}\n", bins.TestPlugin, extra))
	}
	// The CPU time of a whole run (start, tools listed, stop) of the host
	// and every process it started: on a shared machine the wall-clock
	// start-up swings by more than the sandbox costs, its CPU time much
	// less. (Namespaces the kernel tears down in its own workers are not
	// in it.)
	cpuOf := func(p *mcpProc) time.Duration {
		if st := p.cmd.ProcessState; st != nil {
			return st.UserTime() + st.SystemTime()
		}
		return 0
	}
	type runs struct{ wall, cpu []time.Duration }
	startups := func(binA, cfgA, binB, cfgB string, rounds int) (on, offR runs) {
		for i := 0; i < rounds; i++ { // alternating, so drift falls on both
			for _, r := range []struct {
				bin, cfg string
				to       *runs
			}{{binA, cfgA, &on}, {binB, cfgB, &offR}} {
				p, d := startMCP(b, nil, r.bin, "serve", "--config", r.cfg)
				_ = p.c.Close()
				r.to.wall, r.to.cpu = append(r.to.wall, d), append(r.to.cpu, cpuOf(p))
			}
		}
		return on, offR
	}
	fourRuns, fourOffRuns := startups(host, four(""), host, four(off), 7)
	oneRuns, oneOffRuns := startups(host, one(""), host, one(off), 9)
	ownRuns, selfRuns := startups(host, four(""), unpinned, four(""), 7)
	fourOn, fourOff, oneOn, oneOff := fourRuns.wall, fourOffRuns.wall, oneRuns.wall, oneOffRuns.wall

	confined, _ := startMCP(b, nil, host, "serve", "--config", one(""))
	open, _ := startMCP(b, nil, host, "serve", "--config", one(off))
	st := interleave(b, 6000, 1, 6, confined.echo("fx__echo"), open.echo("fx__echo"))
	tp := interleave(b, 8000, 32, 4, confined.echo("fx__echo"), open.echo("fx__echo"))
	_ = confined.c.Close()
	_ = open.c.Close()

	ratio := func(a, b float64) string { return fmt.Sprintf("%.2fx", a/b) }
	fmt.Printf("\n%-44s %18s %24s %8s\n", "sandbox on vs off (same run)", "confined", "sandbox off", "ratio")
	row := func(name, a, c, r string) { fmt.Printf("%-44s %18s %24s %8s\n", name, a, c, r) }
	row("start-up, four built-ins (median)", ms(median(fourOn)), ms(median(fourOff)), ratio(float64(median(fourOn)), float64(median(fourOff))))
	row("start-up, one plugin (median)", ms(median(oneOn)), ms(median(oneOff)), ratio(float64(median(oneOn)), float64(median(oneOff))))
	row("CPU of a run, four built-ins (median)", ms(median(fourRuns.cpu)), ms(median(fourOffRuns.cpu)), ratio(float64(median(fourRuns.cpu)), float64(median(fourOffRuns.cpu))))
	row("CPU of a run, one plugin (median)", ms(median(oneRuns.cpu)), ms(median(oneOffRuns.cpu)), ratio(float64(median(oneRuns.cpu)), float64(median(oneOffRuns.cpu))))
	row("echo p50 through the host, 1 caller", us(st[0].p50), us(st[1].p50), ratio(float64(st[0].p50), float64(st[1].p50)))
	row("echo calls/s through the host, 32 callers", fmt.Sprintf("%.0f", tp[0].perSec), fmt.Sprintf("%.0f", tp[1].perSec), ratio(tp[0].perSec, tp[1].perSec))
	fmt.Printf("\n%-44s %18s %24s %8s\n", "serving built-ins (same run, confined)", "switchboard-builtins", "host re-executed", "ratio")
	row("start-up, four built-ins (median)", ms(median(ownRuns.wall)), ms(median(selfRuns.wall)), ratio(float64(median(ownRuns.wall)), float64(median(selfRuns.wall))))
	row("CPU of a run, four built-ins (median)", ms(median(ownRuns.cpu)), ms(median(selfRuns.cpu)), ratio(float64(median(ownRuns.cpu)), float64(median(selfRuns.cpu))))
	fmt.Printf("\nsummary: the sandbox adds %.1f ms to one plugin's start (target <= 10 ms) and %.1f ms to the four built-ins' start (they start in parallel); call p50 %.2fx (target within 5%%); CPU %.1f ms more per run with one plugin, %.1f ms with four\n",
		float64((median(oneOn)-median(oneOff)).Microseconds())/1000, float64((median(fourOn)-median(fourOff)).Microseconds())/1000,
		float64(st[0].p50)/float64(st[1].p50),
		float64((median(oneRuns.cpu)-median(oneOffRuns.cpu)).Microseconds())/1000, float64((median(fourRuns.cpu)-median(fourOffRuns.cpu)).Microseconds())/1000)
}
