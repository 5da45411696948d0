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

	"github.com/maos-project/maos/api"
)

// StreamQuery selects what a stream carries; see GET /v1/stream.
type StreamQuery struct {
	Agent   string // the agent's inbox, tasks and approvals ("" for none)
	Channel string // one channel ("" for all)
	After   uint64 // start after this seq; sent as Last-Event-ID
	// Resume, if set, is the Last-Event-ID to start after, winning over
	// After: the last non-empty StreamEvent.ID seen ("N", "N:task" or
	// "N:approval").
	Resume string
	// Events lists the kinds of event that come (EventMessage, EventTask,
	// EventApproval); when empty, Tasks says.
	Events []string
	// Tasks is the older form of Events: "" for messages alone (what a
	// stream carried before tasks), StreamTasksAll for task events
	// interleaved with messages, StreamTasksOnly for task events alone.
	Tasks string
}

// StreamEvent is one event of a stream: a message, a task update, an
// approval update, or Ready (with Seq the last index of the backlog) once
// the stream caught up.
type StreamEvent struct {
	Ready    bool
	Seq      uint64 // the message's seq, or the index of the update's entry
	Message  *api.Message
	Task     *api.TaskUpdate
	Approval *api.ApprovalUpdate
	// ID is the event's SSE id: "N" for a message, "N:task" or
	// "N:approval" for the last object update of entry N, "" for one that
	// is not its entry's last (resume from the last non-empty ID: no gap,
	// no repeat).
	ID string
}

// Stream opens GET /v1/stream and calls fn for every event until ctx ends,
// the server closes the stream, or fn returns an error (which Stream
// returns). To resume after an error, call it again with Resume set to
// the last non-empty ID fn saw (or, for a stream of messages alone, After
// set to the last Seq): the server resumes with no gap and no repeat.
func (c *Client) Stream(ctx context.Context, q StreamQuery, fn func(StreamEvent) error) error {
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
		v.Set("tasks", StreamTasksNone)
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
		var m api.Message
		if err := json.Unmarshal([]byte(data), &m); err != nil {
			return fmt.Errorf("transport: stream: bad message event %s: %w", id, err)
		}
		return fn(StreamEvent{Seq: m.Seq, Message: &m, ID: id})
	case EventTask:
		var u api.TaskUpdate
		if err := json.Unmarshal([]byte(data), &u); err != nil || u.Task == nil {
			return fmt.Errorf("transport: stream: bad task event %s: %.200s (%v)", id, data, err)
		}
		return fn(StreamEvent{Seq: u.Event.Seq, Task: &u, ID: id})
	case EventApproval:
		var u api.ApprovalUpdate
		if err := json.Unmarshal([]byte(data), &u); err != nil || u.Approval == nil {
			return fmt.Errorf("transport: stream: bad approval event %s: %.200s (%v)", id, data, err)
		}
		return fn(StreamEvent{Seq: u.Event.Seq, Approval: &u, ID: id})
	}
	return nil // an event this client does not know
}
