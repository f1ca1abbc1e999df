package sink

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"time"
)

// applyRequest is the body of POST /apply.
type applyRequest struct {
	Key string `json:"key"`
	// PID is the delivering process, so the host of the sink can tell which
	// worker delivered what (the demo driver kills that one).
	PID int `json:"pid"`
}

// Server serves a Store over HTTP on a local address, so that worker
// processes, which may be SIGKILLed at any instant, share one sink:
//
//	POST /apply {"key":K,"pid":P} -> Delivery
//	GET  /stats                   -> Stats
type Server struct {
	// Store is where deliveries go.
	Store *Store
	// AfterApplyFunc, if set, runs after a delivery is durable and before it
	// is acknowledged to the worker: the instant at which killing the worker
	// forces a redelivery of an effect that was already applied.
	AfterApplyFunc func(d Delivery, pid int)
}

// ServeHTTP implements http.Handler.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	switch {
	case r.Method == http.MethodPost && r.URL.Path == "/apply":
		var req applyRequest
		if err := json.NewDecoder(r.Body).Decode(&req); err != nil || req.Key == "" {
			http.Error(w, "want a JSON body with a non-empty key", http.StatusBadRequest)
			return
		}
		d, err := s.Store.Apply(r.Context(), req.Key)
		if err != nil {
			http.Error(w, err.Error(), http.StatusServiceUnavailable)
			return
		}
		if s.AfterApplyFunc != nil {
			s.AfterApplyFunc(d, req.PID)
		}
		writeJSON(w, d)
	case r.Method == http.MethodGet && r.URL.Path == "/stats":
		writeJSON(w, s.Store.Stats())
	default:
		http.NotFound(w, r)
	}
}

func writeJSON(w http.ResponseWriter, v any) {
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(v)
}

// Client is a Sink that delivers to a Server over HTTP.
type Client struct {
	base string
	hc   *http.Client
}

// NewClient returns a Client for the Server at addr (host:port).
func NewClient(addr string) *Client {
	return &Client{base: "http://" + addr, hc: &http.Client{Timeout: 30 * time.Second}}
}

// Apply implements Sink. A delivery whose answer is lost (the connection
// broke) may still have been applied; the caller retries with the same key and
// the Server suppresses the duplicate.
func (c *Client) Apply(ctx context.Context, key string) (Delivery, error) {
	body, _ := json.Marshal(applyRequest{Key: key, PID: os.Getpid()})
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, c.base+"/apply", bytes.NewReader(body))
	if err != nil {
		return Delivery{}, fmt.Errorf("sink: %w", err)
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := c.hc.Do(req)
	if err != nil {
		return Delivery{}, fmt.Errorf("sink: %w", err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		msg, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
		return Delivery{}, fmt.Errorf("sink: apply %q: %s: %s", key, resp.Status, bytes.TrimSpace(msg))
	}
	var d Delivery
	if err := json.NewDecoder(resp.Body).Decode(&d); err != nil {
		return Delivery{}, fmt.Errorf("sink: decode reply: %w", err)
	}
	return d, nil
}

// Stats asks the Server for its totals.
func (c *Client) Stats(ctx context.Context) (Stats, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, c.base+"/stats", nil)
	if err != nil {
		return Stats{}, fmt.Errorf("sink: %w", err)
	}
	resp, err := c.hc.Do(req)
	if err != nil {
		return Stats{}, fmt.Errorf("sink: %w", err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return Stats{}, fmt.Errorf("sink: stats: %s", resp.Status)
	}
	var st Stats
	if err := json.NewDecoder(resp.Body).Decode(&st); err != nil {
		return Stats{}, fmt.Errorf("sink: decode stats: %w", err)
	}
	return st, nil
}
