// Package rules is maos's communication-rules document: who may message
// whom, and who may interrupt. It decodes the document (Decode, JSON or
// YAML), writes it back (EncodeYAML), validates it and compiles it
// (Compile) into a value that answers per pair (Compiled.Allows) and per
// sender (Compiled.MayInterrupt). It is pure: no storage, no clock, no
// network; the answers are functions of the document and the arguments,
// so every node that holds the same document refuses the same sends.
//
// fsm stores the document (its JSON form) through the set_rules command
// and checks every resolved recipient of a send at apply; transport reads
// it from PUT /v1/rules; maosctl reads it from a file and prints it.
//
// # The document
//
// JSON or YAML; the YAML keys are the JSON names:
//
//	preset: hierarchical            # optional; the only preset so far
//	orchestrator_role: orchestrator # optional, with the preset; default "orchestrator"
//	default: deny                   # optional: allow | deny, for pairs no list speaks about
//	reroute_blocked_to: orchestrator # optional: gets what the rules block, instead of nobody
//	interrupt: [master_agent, "role:lead"] # optional: who may interrupt (see below)
//	agents:                         # per subject: who it may send to, hear from
//	  - agent: developer_agent
//	    can_send_to: [master_agent, reviewer_agent, "role:tester"]
//	    can_receive_from: ["*"]
//	  - agent: "engineer_*"
//	    can_send_to: ["role:orchestrator"]
//	allowed_interactions:           # the seed format: the same, keyed by subject
//	  master_agent: {can_send_to: ["*"], can_receive_from: ["*"]}
//	forbidden:                      # {from, to, reason}; override every allow
//	  - {from: tester_agent, to: reviewer_agent, reason: Should go through developer first}
//
// forbidden_interactions is accepted as another name for forbidden, as in
// the seed file communication_rules.yaml. A list may be given as one string
// ("*"); null or a missing list says nothing, [] allows nobody.
//
// Selectors (subjects, list entries, from and to of forbidden entries,
// interrupt entries): an agent id ("codex"), "role:NAME" (every agent
// registered with that role), a glob matched against agent ids with
// path.Match ("engineer_*", "qa-?", "[ab]*"), or "*" (also "all") for
// every agent. An agent that is not registered has no role, so role
// selectors never match it.
//
// # Precedence
//
// For a send from F (role FR) to one recipient T (role TR):
//
//  1. No document: allowed.
//  2. A forbidden entry whose from matches F and whose to matches T refuses
//     the send, whatever any list allows. Its reason is the answer (the
//     first matching entry in document order; forbidden before
//     forbidden_interactions); an entry without one gets "forbidden by
//     forbidden[i]: F → T".
//  3. The sender's can_send_to: among the entries whose subject matches F
//     and that give can_send_to, only those of the most specific kind count:
//     an agent id over role:NAME over a glob over "*". Several entries of
//     that kind count together (any of their lists may admit T). If such
//     entries exist and none admits T, the send is refused.
//  4. The recipient's can_receive_from, chosen the same way for T, must
//     admit F.
//  5. If neither 3 nor 4 found a list (the document says nothing about
//     this pair), the default decides: "default" if the document sets it;
//     otherwise deny when the document has any allow list or a preset (it is
//     an allowlist: what it does not allow is refused), allow when it has
//     only forbidden entries (a denylist: what it does not forbid is
//     allowed).
//
// A more specific entry replaces a less specific one only for the list it
// gives: an agent entry with only can_receive_from keeps the can_send_to of
// its role or glob entry.
//
// The hierarchical preset adds two entries as if listed first in agents:
// subject "*" with can_send_to ["role:ORCH"], and subject "role:ORCH"
// with can_send_to ["*"], ORCH being orchestrator_role. So a worker (any
// agent not of that role, registered or not) may send only to
// orchestrators, an orchestrator to anyone; a more specific entry (a role,
// a glob, an id) refines that for its subjects, and forbidden entries
// still override.
//
// # Rerouting
//
// reroute_blocked_to (an agent id; seed 004's hub) changes what a refusal
// does, not who is refused: a message the rules block for a recipient is
// delivered to that agent instead of being dropped, so a hub orchestrator
// sees (and may forward) what workers may not send each other. The
// document only names the agent; the storer (fsm) delivers the copy and
// marks it. Without it, a blocked copy goes nowhere.
//
// # Interrupts
//
// Interrupt authority is its own rule, not a consequence of the lists: an
// agent the lists let message another may still not interrupt it. The
// interrupt list admits whoever one of its selectors matches; without it
// (and with no document) only the roles master, orchestrator and
// supervisor may interrupt, whatever the preset's orchestrator_role; an
// empty list lets nobody. Moderators are the caller's business (a token's
// privilege, not a rule of the document). The refusal names the rule:
// "interrupt: only roles master, orchestrator, supervisor may interrupt".
//
// # Limits and errors
//
// MaxBytes for the document as JSON, MaxEntries entries in agents plus
// allowed_interactions and as many in forbidden plus
// forbidden_interactions, MaxSelectors per list, MaxSelectorLen per
// selector, MaxReasonLen per reason. A refused document is a *FieldError
// naming the field: "agents[2].can_send_to[0]: bad glob ...". Input that
// is not one document is an error wrapping ErrMalformed.
package rules
