// Package bridge moves messages between maos and the file-based mailbox
// systems farms use today (the layouts in shared/seeds/):
//
//   - mailbox: per-agent inbox/ and outbox/ folders of JSON messages
//     (mailboxes/{agent}/inbox/msg_001.json);
//   - channel: channel folders of append-only
//     msg-YYYYMMDD-HHMMSS-{agent}-{hex}.json files, session_id as channel;
//   - adr008: the messages/inbox/{agent}/ and messages/outbox/{agent}/ tree.
//
// Import (import.go) reads any of them, maps each dialect onto api.Message
// (package dialect, given the file's Place) and sends it with
// transport.Client.Send; the mapping is a pure function of the file's bytes
// and place, so a second import is answered by the idempotent send (same
// id, same content) and adds nothing. Mirror (mirror.go) keeps a channel
// folder in the channel layout, one file per public message, never
// rewriting one.
package bridge
