package maosd

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"

	"github.com/maos-project/maos/metrics"
	"github.com/maos-project/maos/testing/testenv"
)

// --metrics-addr serves the node's metrics without a token on a listener
// of its own, while the API's GET /metrics still asks for the admin token.
func TestMetricsAddrServesWithoutAuth(t *testing.T) {
	token := strings.Repeat("m", 44)
	ready, log := runMaosdUntilReady(t, nil, "--metrics-addr", "127.0.0.1:0",
		"--auth", "--admin-token-file", writeTokenFile(t, token+"\n", 0o600))
	var metricsAddr string
	for _, line := range strings.Split(log, "\n") {
		var m map[string]any
		if json.Unmarshal([]byte(line), &m) == nil && m["msg"] == "serving metrics without auth" {
			metricsAddr, _ = m["metrics_addr"].(string)
		}
	}
	if metricsAddr == "" {
		t.Fatalf("no \"serving metrics without auth\" line with metrics_addr in the log:\n%s", log)
	}
	get := func(url, bearer string) *http.Response {
		req, err := http.NewRequest(http.MethodGet, url, nil)
		if err != nil {
			t.Fatal(err)
		}
		if bearer != "" {
			req.Header.Set("Authorization", "Bearer "+bearer)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { resp.Body.Close() })
		return resp
	}
	scrape := func() map[string]*dto.MetricFamily {
		resp := get("http://"+metricsAddr+"/metrics", "")
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("GET --metrics-addr /metrics: %d", resp.StatusCode)
		}
		fams, err := metrics.Parse(resp.Body)
		if err != nil {
			t.Fatal(err)
		}
		return fams
	}
	// A single node bootstrapped: it leads, once its election is over.
	fams := scrape()
	for deadline := testenv.Deadline(t); ; time.Sleep(20 * time.Millisecond) {
		if v, _ := metrics.Value(fams, "maos_raft_state", map[string]string{"state": "leader"}); v == 1 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("maos_raft_state{state=leader} did not become 1 by the test's deadline")
		}
		fams = scrape()
	}
	if _, ok := metrics.Value(fams, "go_goroutines", nil); !ok {
		t.Error("no go_goroutines: the Go collector is not registered")
	}
	if code := get("http://"+metricsAddr+"/v1/channels", "").StatusCode; code != http.StatusNotFound {
		t.Errorf("--metrics-addr answered the API's /v1/channels with %d, want 404", code)
	}
	apiAddr := "http://" + ready["api_addr"].(string) + "/metrics"
	if code := get(apiAddr, "").StatusCode; code != http.StatusUnauthorized {
		t.Errorf("API GET /metrics without a token: %d, want 401", code)
	}
	if code := get(apiAddr, token).StatusCode; code != http.StatusOK {
		t.Errorf("API GET /metrics with the admin token: %d, want 200", code)
	}
}
