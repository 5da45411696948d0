package fsm

import (
	"strings"
	"unicode/utf8"
)

// replyTitlePrefix starts the title of a reply to a titled message.
const replyTitlePrefix = "Re: "

// NewReply is from's answer to orig with text, as every client builds it
// (maosctl reply, the MCP reply_to_message, a watcher's answer): to orig's
// sender, in orig's channel and thread (ThreadID the thread's root),
// InReplyTo orig, titled "Re: " and orig's title (none for an untitled
// orig, no second "Re: ", cut to MaxTitleLen bytes), of type
// "task_result" for a "task_assign" and "response" otherwise,
// priority normal, and private or for moderators when orig is (the state
// machine makes it so anyway; see applySend). The ID is left empty: the caller sets one
// (derived, so that a retry is stored once) or the send generates it.
func NewReply(orig *Message, from, text string) *Message {
	r := &Message{
		Channel:    orig.Channel,
		From:       from,
		To:         Recipients{orig.From},
		Type:       replyType(orig.Type),
		Title:      replyTitle(orig.Title),
		Priority:   PriorityNormal,
		Content:    Content{Text: text},
		InReplyTo:  orig.ID,
		ThreadID:   ThreadOf(orig),
		Visibility: VisibilityPublic,
	}
	if !orig.Public() {
		r.Visibility = orig.Visibility
	}
	return r
}

// replyType is the type of an answer to a message of type typ.
func replyType(typ string) string {
	if typ == "task_assign" {
		return "task_result"
	}
	return "response"
}

// replyTitle is the title of a reply to a message titled title.
func replyTitle(title string) string {
	if title == "" || strings.HasPrefix(title, replyTitlePrefix) {
		return title
	}
	return TruncateUTF8(replyTitlePrefix+title, MaxTitleLen)
}

// TruncateUTF8 is s cut to at most n bytes without splitting a character.
func TruncateUTF8(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n]
}
