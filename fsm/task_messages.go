package fsm

import (
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/maos-project/maos/api"
)

// A task is also visible as messages, so inboxes, watchers, hooks and the
// audit keep working: its creation posts a task_delegation to its
// assignee, its end a task_completion reply to its creator, a handoff a
// handoff message to the new assignee, and a timeout an incident to the
// creator and the cluster's escalation_target. Their ids are derived
// (DerivedID) from the sender, the entry's time and the task, so each is
// stored once.
//
// One entry stores one message (a message's seq is its entry's index).
// A command's own message (delegation, completion by the claimant,
// handoff) is stored in its entry; the messages SystemSender sends about
// other tasks (the replies of dependents a cascade fails, a timeout's
// reply and incident) are queued in task_outbox and stored by the ticks
// that follow, one per tick, oldest first. NextDeadline counts a
// queued message as due at once, so the leader ticks until the outbox is
// empty.

// taskMeta is the metadata {"task_id": id} (and fields), in key order.
func taskMeta(id string, extra map[string]any) json.RawMessage {
	m := map[string]any{api.MetaTaskID: id}
	for k, v := range extra {
		m[k] = v
	}
	b, err := json.Marshal(m)
	if err != nil {
		panic(fmt.Sprintf("fsm: task %s: encode metadata: %v", id, err))
	}
	return b
}

// textOr is s, or alt when s is blank (as Message.Validate judges it): a
// message needs text.
func textOr(s, alt string) string {
	if strings.TrimSpace(s) == "" {
		return alt
	}
	return s
}

// delegation is the task_delegation message of t, from its creator to its
// assignee: title, description as text (the title when there is none),
// correlation_id and metadata naming the task.
func delegation(t *api.Task) api.Message {
	return api.Message{
		ID:            api.DerivedID(t.From, t.Created, "task:"+t.ID),
		Channel:       t.Channel,
		From:          t.From,
		To:            api.Recipients{t.To},
		Type:          api.TypeTaskDelegation,
		Title:         t.Title,
		Priority:      t.Priority,
		Content:       api.Content{Text: textOr(t.Description, t.Title)},
		CorrelationID: t.ID,
		Visibility:    api.VisibilityPublic,
		Metadata:      taskMeta(t.ID, nil),
	}
}

// completionTitle is "<status> (<confidence>) <title>", or "<status>
// <title>" without a confidence, cut to MaxTitleLen: the audit line is
// TASK_COMPLETION: success (0.97) Review the retry logic.
func completionTitle(c *api.TaskCompletion, title string) string {
	return api.TruncateUTF8(completionHead(c)+" "+title, api.MaxTitleLen)
}

// completionHead is "<status> (<confidence>)", or "<status>".
func completionHead(c *api.TaskCompletion) string {
	if c.ConfidenceScore == nil {
		return c.Status
	}
	return c.Status + " (" + strconv.FormatFloat(*c.ConfidenceScore, 'f', -1, 64) + ")"
}

// completionReply is the task_completion reply to t's creator from from
// (the claimant, or SystemSender) at ts, answering the delegation: its
// result as text (the error's message, or the title, when there is none)
// and the completion as metadata.
func completionReply(t *api.Task, from string, ts int64) api.Message {
	c := t.Completion
	meta, err := json.Marshal(c)
	if err != nil {
		panic(fmt.Sprintf("fsm: task %s: encode the completion: %v", t.ID, err))
	}
	text := c.Result
	if c.Error != nil {
		text = textOr(text, c.Error.ErrorMessage)
	}
	title := completionTitle(c, t.Title)
	return api.Message{
		ID:            api.DerivedID(from, time.Unix(0, ts), "task-done:"+t.ID),
		Channel:       t.Channel,
		From:          from,
		To:            api.Recipients{t.From},
		Type:          api.TypeTaskCompletion,
		Title:         title,
		Priority:      t.Priority,
		Content:       api.Content{Text: textOr(text, title)},
		InReplyTo:     t.MessageID,
		CorrelationID: t.ID,
		Visibility:    api.VisibilityPublic,
		Metadata:      meta,
	}
}

// handoffMessageID is the id of agent's handoff message of task id,
// claimed under fence, sent at t: derived, so a retry stores it once and
// a retried handoff finds it.
func handoffMessageID(agent string, t time.Time, id string, fence uint64) string {
	return api.DerivedID(agent, t, "task-handoff:"+id+":"+strconv.FormatUint(fence, 10))
}

// handoffMessage is agent's handoff of t (claimed under fence) to its new
// assignee t.To at ts, with reason: seed 002 §3 Handoff.
func handoffMessage(t *api.Task, agent string, fence uint64, ts int64, reason string) api.Message {
	return api.Message{
		ID:            handoffMessageID(agent, time.Unix(0, ts), t.ID, fence),
		Channel:       t.Channel,
		From:          agent,
		To:            api.Recipients{t.To},
		Type:          api.TypeTaskHandoff,
		Title:         t.Title,
		Priority:      t.Priority,
		Content:       api.Content{Text: textOr(reason, "handed over by "+agent+": "+t.Title)},
		InReplyTo:     t.MessageID,
		CorrelationID: t.ID,
		Visibility:    api.VisibilityPublic,
		Metadata:      taskMeta(t.ID, map[string]any{"from_claim": fence, "reason": reason}),
	}
}

// incident is SystemSender's high-priority incident about t, which failed
// with a timeout at ts, to its creator and to target (the cluster's
// escalation_target; "" or the creator: the creator alone).
func incident(t *api.Task, ts int64, target string) api.Message {
	to := api.Recipients{t.From}
	if target != "" && target != t.From {
		to = append(to, target)
	}
	title := api.TruncateUTF8(fmt.Sprintf("timed out after %d attempts: %s", t.Attempt, t.Title), api.MaxTitleLen)
	return api.Message{
		ID:       api.DerivedID(api.SystemSender, time.Unix(0, ts), "task-incident:"+t.ID),
		Channel:  t.Channel,
		From:     api.SystemSender,
		To:       to,
		Type:     api.TypeTaskIncident,
		Title:    title,
		Priority: api.PriorityHigh,
		Content: api.Content{Text: fmt.Sprintf("Task %s (%q, for %s) failed: %s. Look at why its claimants did not finish it, then create it again.",
			t.ID, t.Title, t.To, t.Completion.Error.ErrorMessage)},
		InReplyTo:     t.MessageID,
		CorrelationID: t.ID,
		Visibility:    api.VisibilityPublic,
		Metadata:      taskMeta(t.ID, map[string]any{"error": t.Completion.Error}),
	}
}
