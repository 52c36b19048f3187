package frontend

import (
	"context"
	"net/http"
	"time"
)

// The probes of the HTTP front end, for a load balancer or an orchestrator
// (Kubernetes liveness and readiness probes, an HAProxy health check).
const (
	// HealthPath answers 200 while the process serves HTTP at all
	// (liveness: restart the host when it stops answering).
	HealthPath = "/healthz"
	// ReadyPath answers 200 once the servers have started (the front end
	// serves only after their start wait) and the shared store, if any,
	// answers; otherwise 503 with the reason (readiness: send no calls).
	ReadyPath = "/readyz"
)

// readyTimeout bounds one readiness check.
const readyTimeout = 2 * time.Second

// serveProbes adds the probes to mux. They skip the origin checks: a
// probe comes from a load balancer or the kubelet, with whatever Host it
// dialled, and the answers hold no more than a state and its reason.
// Only GET and HEAD are served.
func serveProbes(mux *http.ServeMux, ready func(context.Context) error) {
	mux.HandleFunc("GET "+HealthPath, func(w http.ResponseWriter, _ *http.Request) {
		probeAnswer(w, http.StatusOK, "ok\n")
	})
	mux.HandleFunc("GET "+ReadyPath, func(w http.ResponseWriter, r *http.Request) {
		if ready != nil {
			ctx, cancel := context.WithTimeout(r.Context(), readyTimeout)
			defer cancel()
			if err := ready(ctx); err != nil {
				probeAnswer(w, http.StatusServiceUnavailable, "not ready: "+err.Error()+"\n")
				return
			}
		}
		probeAnswer(w, http.StatusOK, "ready\n")
	})
}

func probeAnswer(w http.ResponseWriter, code int, body string) {
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(code)
	_, _ = w.Write([]byte(body))
}
