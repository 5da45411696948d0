package transport

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"

	"github.com/maos-project/maos/fsm"
)

// StreamQuery selects what a stream carries; see GET /v1/stream.
type StreamQuery struct {
	Agent   string // the agent's inbox ("" for none)
	Channel string // one channel ("" for all)
	After   uint64 // start after this seq; sent as Last-Event-ID
}

// StreamEvent is one event of a stream: a message, or Ready (with Seq the
// last seq of the backlog) once the stream caught up.
type StreamEvent struct {
	Ready   bool
	Seq     uint64
	Message *fsm.Message
}

// Stream opens GET /v1/stream and calls fn for every event until ctx ends,
// the server closes the stream, or fn returns an error (which Stream
// returns). To resume after an error, call it again with After set to the
// last Seq fn saw: the server resumes with no gap and no repeat.
func (c *Client) Stream(ctx context.Context, q StreamQuery, fn func(StreamEvent) error) error {
	v := url.Values{}
	if q.Agent != "" {
		v.Set("agent", q.Agent)
	}
	if q.Channel != "" {
		v.Set("channel", q.Channel)
	}
	u := c.base + "/v1/stream"
	if len(v) > 0 {
		u += "?" + v.Encode()
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return fmt.Errorf("transport: stream %s: %w", u, err)
	}
	req.Header.Set("Accept", "text/event-stream")
	c.setAuth(req)
	if q.After > 0 {
		req.Header.Set("Last-Event-ID", strconv.FormatUint(q.After, 10))
	}
	resp, err := c.hc.Do(req)
	if err != nil {
		return c.requestError(http.MethodGet, u, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		data, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
		var eb ErrorBody
		if json.Unmarshal(data, &eb) == nil && eb.Error != nil && eb.Error.Code != "" {
			eb.Error.Status = resp.StatusCode
			eb.Error.RetryAfter = parseRetryAfter(resp.Header.Get("Retry-After"))
			return eb.Error
		}
		return &APIError{Status: resp.StatusCode, Code: CodeInternal, Message: fmt.Sprintf("stream %s: %s", u, strings.TrimSpace(string(data)))}
	}
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 64<<10), 4<<20)
	var event, id string
	var data strings.Builder
	for sc.Scan() {
		line := sc.Text()
		switch {
		case line == "":
			if err := dispatchEvent(event, id, data.String(), fn); err != nil {
				return err
			}
			event, id = "", ""
			data.Reset()
		case strings.HasPrefix(line, ":"):
			// comment: keep-alive or the reason the server ends the stream
		case strings.HasPrefix(line, "event:"):
			event = strings.TrimSpace(strings.TrimPrefix(line, "event:"))
		case strings.HasPrefix(line, "id:"):
			id = strings.TrimSpace(strings.TrimPrefix(line, "id:"))
		case strings.HasPrefix(line, "data:"):
			if data.Len() > 0 {
				data.WriteByte('\n')
			}
			data.WriteString(strings.TrimPrefix(strings.TrimPrefix(line, "data:"), " "))
		}
	}
	if err := sc.Err(); err != nil && ctx.Err() == nil {
		return fmt.Errorf("transport: stream %s: %w", u, err)
	}
	return ctx.Err()
}

func dispatchEvent(event, id, data string, fn func(StreamEvent) error) error {
	switch event {
	case EventReady:
		var r struct {
			Seq uint64 `json:"seq"`
		}
		if err := json.Unmarshal([]byte(data), &r); err != nil {
			return fmt.Errorf("transport: stream: bad ready event: %w", err)
		}
		return fn(StreamEvent{Ready: true, Seq: r.Seq})
	case EventMessage:
		var m fsm.Message
		if err := json.Unmarshal([]byte(data), &m); err != nil {
			return fmt.Errorf("transport: stream: bad message event %s: %w", id, err)
		}
		return fn(StreamEvent{Seq: m.Seq, Message: &m})
	}
	return nil // an event this client does not know
}
