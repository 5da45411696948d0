package transport

import (
	"context"

	"github.com/maos-project/maos/api"
	"github.com/maos-project/maos/fsm"
)

// Private messages on the read paths. Every handler that returns messages,
// or something about one, asks viewerFrom(ctx) who reads and keeps what
// that viewer may read (api.Viewer.CanRead): a private message is
// readable only by its sender, its recipients and moderators. For anyone
// else it does not exist: GET answers 404 exactly as for an unknown id,
// pages and streams leave it out, the audit trail shows a redacted line.
// Without authentication (no Identity in the context) every reader is
// unrestricted, as before tokens existed.

// viewerFrom is who reads for ctx: nil, unrestricted, when the request
// carries no Identity (the node runs without --auth).
func viewerFrom(ctx context.Context) *api.Viewer {
	id := IdentityFrom(ctx)
	if id == nil {
		return nil
	}
	return &api.Viewer{Agent: id.Agent, Moderator: id.Moderates()}
}

// errHiddenMessage is the answer for message id when the viewer may not
// read it: the same not-found, in the same words, as fsm.FSM.Message
// gives for an id that is not stored, so the answer does not tell that it
// exists.
func errHiddenMessage(id string) error {
	return fsm.MessageNotFound(id)
}

// visibleMessages is a page of up to limit messages with seq > after that
// v may read, oldest first, and whether messages after it exist. read
// returns one page of the source (messages with seq > after, at most
// limit, and whether more exist). A nil v reads once, as is. Otherwise
// it reads on past the messages v may not read until the page is full or
// the source ends, so a page with more=true always ends on a message and
// its last seq is the next cursor, as for an unfiltered page; a page costs
// the messages it skipped.
func visibleMessages(v *api.Viewer, after uint64, limit int,
	read func(after uint64, limit int) ([]*api.Message, bool, error)) ([]*api.Message, bool, error) {
	if v == nil {
		return read(after, limit)
	}
	out := []*api.Message{}
	for {
		msgs, more, err := read(after, limit)
		if err != nil {
			return nil, false, err
		}
		for _, m := range msgs {
			if !v.CanRead(m) {
				continue
			}
			if len(out) == limit {
				return out, true, nil
			}
			out = append(out, m)
		}
		// An empty page that claims more cannot advance: stop rather than spin.
		if !more || len(msgs) == 0 {
			return out, more && len(out) > 0, nil
		}
		if len(out) == limit {
			return out, true, nil
		}
		after = msgs[len(msgs)-1].Seq
	}
}

// auditFor is audit event e as v sees it: for a nil v (no authentication)
// with a private event's text hidden (RedactAudit), as before readers
// authenticated; whole for a party of the message or a moderator;
// otherwise redacted to its seq, index, time and kind (fsm.RedactEvent).
func auditFor(v *api.Viewer, e api.AuditEvent) api.AuditEvent {
	switch {
	case v == nil:
		return RedactAudit(e)
	case v.CanReadEvent(&e):
		return e
	default:
		return fsm.RedactEvent(e)
	}
}

// visibleInbox drops from an inbox page the entries v may not read. An
// inbox holds only messages delivered to its agent, so this removes
// something only when someone reads another agent's inbox (which the
// authorization check refuses to anyone but a moderator); it is kept as a
// second line of defence. HasMore and NextAfter stay as they are: they
// are the cursor over the entries read, seen or not.
func visibleInbox(v *api.Viewer, page api.InboxPage) api.InboxPage {
	if v == nil {
		return page
	}
	kept := page.Messages[:0]
	for i := range page.Messages {
		if v.CanRead(&page.Messages[i].Message) {
			kept = append(kept, page.Messages[i])
		}
	}
	page.Messages = kept
	return page
}

// visibleReceipts answers the receipts of message id as v sees them: not
// found, in fsm's words, when v may not read the message; otherwise with
// the reply id of an answered receipt left out when v may not read that
// reply.
func visibleReceipts(f Reader, v *api.Viewer, id string) (api.Receipts, error) {
	if v != nil {
		if m, err := f.Message(id); err == nil && !v.CanRead(m) {
			return api.Receipts{}, errHiddenMessage(id)
		}
	}
	rs, err := f.Receipts(id)
	if err != nil || v == nil {
		return rs, err
	}
	for i := range rs.Receipts {
		if rid := rs.Receipts[i].ReplyID; rid != "" {
			if m, err := f.Message(rid); err == nil && !v.CanRead(m) {
				rs.Receipts[i].ReplyID = ""
			}
		}
	}
	return rs, nil
}

// visibleThread is a page of thread id as v sees it (fsm.FSM.Thread, with
// the messages v may not read left out as visibleMessages does). Asking
// by the id of a message v may not read is not found, as if it did not
// exist; a thread is reached through the id of any message of it v may
// read.
func visibleThread(f Reader, v *api.Viewer, id string, after uint64, limit int) (api.ThreadPage, error) {
	if v == nil {
		return f.Thread(id, after, limit)
	}
	if m, err := f.Message(id); err == nil && !v.CanRead(m) {
		return api.ThreadPage{}, fsm.ThreadNotFound(id)
	}
	page := api.ThreadPage{ThreadID: id}
	var err error
	page.Messages, page.HasMore, err = visibleMessages(v, after, limit, func(after uint64, limit int) ([]*api.Message, bool, error) {
		p, err := f.Thread(id, after, limit)
		page.ThreadID = p.ThreadID
		return p.Messages, p.HasMore, err
	})
	return page, err
}
