package maosd

import (
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
)

// --debug-addr serves pprof on its own listener; the API does not.
func TestDebugAddrServesPprof(t *testing.T) {
	ready, log := runMaosdUntilReady(t, nil, "--debug-addr", "127.0.0.1:0")
	var debugAddr string
	for _, line := range strings.Split(log, "\n") {
		var m map[string]any
		if json.Unmarshal([]byte(line), &m) == nil && m["msg"] == "serving pprof" {
			debugAddr, _ = m["debug_addr"].(string)
		}
	}
	if debugAddr == "" {
		t.Fatalf("no \"serving pprof\" line with debug_addr in the log:\n%s", log)
	}
	get := func(url string) (int, string) {
		resp, err := http.Get(url)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	if code, body := get("http://" + debugAddr + "/debug/pprof/"); code != http.StatusOK || !strings.Contains(body, "goroutine") {
		t.Errorf("pprof index: %d %.200q", code, body)
	}
	if code, _ := get("http://" + ready["api_addr"].(string) + "/debug/pprof/"); code != http.StatusNotFound {
		t.Errorf("the API answered /debug/pprof/ with %d, want 404", code)
	}
}
