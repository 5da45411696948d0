package client

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

	"github.com/maos-project/maos/api"
)

// Stream opens GET /v1/stream and calls fn for every event until ctx ends,
// the server closes the stream, or fn returns an error (which Stream
// returns). To resume after an error, call it again with Resume set to
// the last non-empty ID fn saw (or, for a stream of messages alone, After
// set to the last Seq): the server resumes with no gap and no repeat.
func (c *Client) Stream(ctx context.Context, q api.StreamQuery, fn func(api.StreamEvent) error) error {
	v := url.Values{}
	if q.Agent != "" {
		v.Set("agent", q.Agent)
	}
	if q.Channel != "" {
		v.Set("channel", q.Channel)
	}
	switch {
	case len(q.Events) > 0:
		v.Set("events", strings.Join(q.Events, ","))
	case q.Tasks != "":
		v.Set("tasks", q.Tasks)
	default:
		v.Set("tasks", api.StreamTasksNone)
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
	switch {
	case q.Resume != "":
		req.Header.Set("Last-Event-ID", q.Resume)
	case q.After > 0:
		req.Header.Set("Last-Event-ID", strconv.FormatUint(q.After, 10))
	}
	resp, err := c.hc.Do(req)
	if err != nil {
		return c.requestError(http.MethodGet, u, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		data, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
		var eb api.ErrorBody
		if json.Unmarshal(data, &eb) == nil && eb.Error != nil && eb.Error.Code != "" {
			eb.Error.Status = resp.StatusCode
			eb.Error.RetryAfter = parseRetryAfter(resp.Header.Get("Retry-After"))
			return eb.Error
		}
		return &api.APIError{Status: resp.StatusCode, Code: api.CodeInternal, Message: fmt.Sprintf("stream %s: %s", u, strings.TrimSpace(string(data)))}
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

func dispatchEvent(event, id, data string, fn func(api.StreamEvent) error) error {
	switch event {
	case api.EventReady:
		var r struct {
			Seq uint64 `json:"seq"`
		}
		if err := json.Unmarshal([]byte(data), &r); err != nil {
			return fmt.Errorf("transport: stream: bad ready event: %w", err)
		}
		return fn(api.StreamEvent{Ready: true, Seq: r.Seq})
	case api.EventMessage:
		var m api.Message
		if err := json.Unmarshal([]byte(data), &m); err != nil {
			return fmt.Errorf("transport: stream: bad message event %s: %w", id, err)
		}
		return fn(api.StreamEvent{Seq: m.Seq, Message: &m, ID: id})
	case api.EventTask:
		var u api.TaskUpdate
		if err := json.Unmarshal([]byte(data), &u); err != nil || u.Task == nil {
			return fmt.Errorf("transport: stream: bad task event %s: %.200s (%v)", id, data, err)
		}
		return fn(api.StreamEvent{Seq: u.Event.Seq, Task: &u, ID: id})
	case api.EventApproval:
		var u api.ApprovalUpdate
		if err := json.Unmarshal([]byte(data), &u); err != nil || u.Approval == nil {
			return fmt.Errorf("transport: stream: bad approval event %s: %.200s (%v)", id, data, err)
		}
		return fn(api.StreamEvent{Seq: u.Event.Seq, Approval: &u, ID: id})
	}
	return nil // an event this client does not know
}
