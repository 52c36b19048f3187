// Package metrics exports a running host's figures in the Prometheus text
// format: calls by server, tool and outcome, their latency, calls in
// flight, server states, restarts, sandbox kills, the memory of each
// server's processes, the audit queue and the HTTP sessions, besides the Go
// runtime's and the process's own figures.
//
// Labels are bounded: server and tool come from the registry (a client's
// made-up tool name is counted under server="" tool=""), outcome from a
// fixed set, caller from the callers the config names (static tokens and
// caller blocks; any other authenticated caller, such as a JWT subject
// without a caller block, is "other", and "" is nobody authenticated). Figures that are state (server states, memory) are read when
// scraped, not kept.
package metrics

import (
	"bufio"
	"bytes"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/switchboard-mcp/switchboard/host/internal/registry"
	"github.com/switchboard-mcp/switchboard/host/internal/supervisor"
)

// Outcomes of a call, the values of the outcome label.
const (
	OutcomeOK             = "ok"
	OutcomeToolError      = "tool_error"
	OutcomeRefusedRule    = "refused_rule"
	OutcomeRefusedSchema  = "refused_schema"
	OutcomeRefusedUnknown = "refused_unknown"
	OutcomeTimeout        = "timeout"
	OutcomeCancelled      = "cancelled"
	OutcomeError          = "error"
)

// States a server may be in, the values of switchboard_server_state's
// state label (one of them is 1 for each server).
var states = []string{"configured", "starting", "ready", "idle-stopped", "reconnecting", "failed", "stopped"}

// Metrics is one host's set of figures.
type Metrics struct {
	reg      *prometheus.Registry
	calls    *prometheus.CounterVec
	duration *prometheus.HistogramVec
	inflight *prometheus.GaugeVec
	callers  func() []string
	// runtime registers the Go runtime's and the process's collectors when
	// the figures are first served: building the Go collector's
	// descriptions took some 5 % of a host's start, and a host whose
	// metrics nobody reads (stdio, or HTTP never scraped) needs neither.
	runtime sync.Once
}

// CallerOther is the caller label of an authenticated caller the config
// does not name.
const CallerOther = "other"

// Options say where the figures that the registry does not hold come from.
type Options struct {
	// HTTPSessions, when set, reports the HTTP front end's live sessions.
	HTTPSessions func() int
	// Callers, when set, are the caller names the caller label may take
	// (auth.Verifier.Names).
	Callers func() []string
}

// New returns the metrics of the host whose registry is r, and adds
// itself to r's call observers.
func New(r *registry.Registry, opts Options) *Metrics {
	m := &Metrics{
		reg: prometheus.NewRegistry(),
		calls: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "switchboard_calls_total",
			Help: "Tool calls by server, tool, outcome (ok, tool_error, refused_rule, refused_schema, refused_unknown, timeout, cancelled, error) and authenticated caller (a configured name, \"other\", or \"\" for none).",
		}, []string{"server", "tool", "outcome", "caller"}),
		duration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "switchboard_call_duration_seconds",
			Help:    "Time from a call's arrival in the host to its answer, refusals included, by server.",
			Buckets: []float64{.0001, .00025, .0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30, 60, 300},
		}, []string{"server"}),
		inflight: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "switchboard_calls_in_flight",
			Help: "Calls accepted and not yet answered, by server.",
		}, []string{"server"}),
		callers: opts.Callers,
	}
	m.reg.MustRegister(m.calls, m.duration, m.inflight, &serverCollector{r: r, opts: opts})
	r.AddObserver(m)
	return m
}

// Handler serves the figures (GET /metrics).
func (m *Metrics) Handler() http.Handler {
	h := promhttp.HandlerFor(m.reg, promhttp.HandlerOpts{ErrorHandling: promhttp.ContinueOnError})
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		m.runtime.Do(func() {
			m.reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
		})
		h.ServeHTTP(w, r)
	})
}

// CallStarted implements registry.CallObserver.
func (m *Metrics) CallStarted(server, _ string) { m.inflight.WithLabelValues(server).Inc() }

// CallEnded implements registry.CallObserver.
func (m *Metrics) CallEnded(server, tool string, rec *registry.AuditRecord, elapsed time.Duration) {
	if server != "" {
		m.inflight.WithLabelValues(server).Dec()
		m.duration.WithLabelValues(server).Observe(elapsed.Seconds())
	}
	m.calls.WithLabelValues(server, tool, Outcome(rec), m.caller(rec.Caller)).Inc()
}

// caller is the caller label of a call by name: bounded by the names the
// config knows.
func (m *Metrics) caller(name string) string {
	if name == "" {
		return ""
	}
	if m.callers != nil && slices.Contains(m.callers(), name) {
		return name
	}
	return CallerOther
}

// Outcome is the outcome label of a call's audit record.
func Outcome(rec *registry.AuditRecord) string {
	switch {
	case rec.Decision == "unknown":
		return OutcomeRefusedUnknown
	case rec.Decision == "invalid":
		return OutcomeRefusedSchema
	case rec.Outcome == "refused":
		return OutcomeRefusedRule
	case rec.Outcome == "ok", rec.Outcome == "tool_error", rec.Outcome == "timeout", rec.Outcome == "cancelled":
		return rec.Outcome
	default:
		return OutcomeError
	}
}

// serverCollector reads the servers' state when scraped.
type serverCollector struct {
	r    *registry.Registry
	opts Options
}

var (
	descState = prometheus.NewDesc("switchboard_server_state",
		"1 for the state each server is in (starting, ready, reconnecting, failed, stopped).", []string{"server", "kind", "state"}, nil)
	descRestarts = prometheus.NewDesc("switchboard_server_restarts_total",
		"Restarts of each server's process or connection.", []string{"server"}, nil)
	descKills = prometheus.NewDesc("switchboard_sandbox_kills_total",
		"Processes of each server that its sandbox ended (memory or process limit).", []string{"server"}, nil)
	descRSS = prometheus.NewDesc("switchboard_server_resident_memory_bytes",
		"Resident memory of each server's process and the processes it started.", []string{"server"}, nil)
	descAudit = prometheus.NewDesc("switchboard_audit_queue_depth",
		"Audit records waiting to be written.", nil, nil)
	descSessions = prometheus.NewDesc("switchboard_http_sessions",
		"Live sessions of the HTTP front end.", nil, nil)
)

func (c *serverCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{descState, descRestarts, descKills, descRSS, descAudit, descSessions} {
		ch <- d
	}
}

func (c *serverCollector) Collect(ch chan<- prometheus.Metric) {
	var tree map[int][]int // pid -> children, read once per scrape
	for _, e := range c.r.Entries() {
		name, kind, state := e.Server.Name(), string(e.Kind), "ready"
		if s, ok := e.Server.(*supervisor.Server); ok {
			st := s.Status()
			state = string(st.State)
			ch <- prometheus.MustNewConstMetric(descRestarts, prometheus.CounterValue, float64(st.Restarts), name)
			ch <- prometheus.MustNewConstMetric(descKills, prometheus.CounterValue, float64(st.SandboxKills), name)
		}
		for _, s := range states {
			v := 0.0
			if s == state {
				v = 1
			}
			ch <- prometheus.MustNewConstMetric(descState, prometheus.GaugeValue, v, name, kind, s)
		}
		if p, ok := e.Server.(registry.Process); ok && p.PID() > 0 {
			if tree == nil {
				tree = children()
			}
			ch <- prometheus.MustNewConstMetric(descRSS, prometheus.GaugeValue, float64(treeRSS(p.PID(), tree)), name)
		}
	}
	for _, f := range c.r.Failures() {
		for _, s := range states {
			v := 0.0
			if s == "failed" {
				v = 1
			}
			ch <- prometheus.MustNewConstMetric(descState, prometheus.GaugeValue, v, f.Name, string(f.Kind), s)
		}
	}
	ch <- prometheus.MustNewConstMetric(descAudit, prometheus.GaugeValue, float64(c.r.AuditQueued()))
	if c.opts.HTTPSessions != nil {
		ch <- prometheus.MustNewConstMetric(descSessions, prometheus.GaugeValue, float64(c.opts.HTTPSessions()))
	}
}

// children maps each process to its children, from /proc.
func children() map[int][]int {
	m := map[int][]int{}
	stats, _ := filepath.Glob("/proc/[0-9]*/stat")
	for _, p := range stats {
		b, err := os.ReadFile(p)
		if err != nil {
			continue
		}
		// pid (comm) state ppid ...: comm may hold spaces and parentheses.
		i := bytes.LastIndexByte(b, ')')
		if i < 0 {
			continue
		}
		f := strings.Fields(string(b[i+1:]))
		if len(f) < 2 {
			continue
		}
		pid, _ := strconv.Atoi(filepath.Base(filepath.Dir(p)))
		ppid, _ := strconv.Atoi(f[1])
		m[ppid] = append(m[ppid], pid)
	}
	return m
}

var pageSize = int64(os.Getpagesize())

// treeRSS sums the resident memory of pid and its descendants.
func treeRSS(pid int, tree map[int][]int) int64 {
	var total int64
	stack := []int{pid}
	for n := 0; len(stack) > 0 && n < 10000; n++ {
		p := stack[len(stack)-1]
		stack = append(stack[:len(stack)-1], tree[p]...)
		total += rss(p)
	}
	return total
}

// rss reads one process's resident memory from /proc/PID/statm.
func rss(pid int) int64 {
	f, err := os.Open("/proc/" + strconv.Itoa(pid) + "/statm")
	if err != nil {
		return 0
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	if !sc.Scan() {
		return 0
	}
	fields := strings.Fields(sc.Text())
	if len(fields) < 2 {
		return 0
	}
	pages, _ := strconv.ParseInt(fields[1], 10, 64)
	return pages * pageSize
}
