package cluster

import (
	"bytes"
	"context"
	"encoding/json"
	"log/slog"
	"sort"

	"github.com/hashicorp/go-hclog"
)

// newHCLogger routes an hclog logger (what hashicorp/raft speaks) into slog:
// hclog writes one JSON object per line and slogWriter re-emits each as a
// slog record with the same level, message and fields.
func newHCLogger(name string, logger *slog.Logger) hclog.Logger {
	level := hclog.Info
	if logger.Enabled(context.Background(), slog.LevelDebug) {
		level = hclog.Debug
	}
	return hclog.New(&hclog.LoggerOptions{
		Name:       name,
		Level:      level,
		JSONFormat: true,
		Output:     &slogWriter{logger: logger},
	})
}

type slogWriter struct{ logger *slog.Logger }

var hclogLevels = map[string]slog.Level{
	"trace": slog.LevelDebug - 4, "debug": slog.LevelDebug, "info": slog.LevelInfo,
	"warn": slog.LevelWarn, "error": slog.LevelError,
}

func (w *slogWriter) Write(p []byte) (int, error) {
	for _, line := range bytes.Split(p, []byte("\n")) {
		if len(bytes.TrimSpace(line)) == 0 {
			continue
		}
		var rec map[string]any
		if err := json.Unmarshal(line, &rec); err != nil {
			w.logger.Info(string(line))
			continue
		}
		msg, _ := rec["@message"].(string)
		lvl, ok := hclogLevels[stringOf(rec["@level"])]
		if !ok {
			lvl = slog.LevelInfo
		}
		keys := make([]string, 0, len(rec))
		for k := range rec {
			if k != "@message" && k != "@level" && k != "@timestamp" {
				keys = append(keys, k)
			}
		}
		sort.Strings(keys)
		attrs := make([]any, 0, 2*len(keys))
		for _, k := range keys {
			name := k
			if k == "@module" {
				name = "module"
			}
			attrs = append(attrs, name, rec[k])
		}
		w.logger.Log(context.Background(), lvl, msg, attrs...)
	}
	return len(p), nil
}

func stringOf(v any) string {
	s, _ := v.(string)
	return s
}
