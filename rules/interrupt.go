package rules

import (
	"fmt"
	"strings"
)

// Interrupt authority (seed 000: only the master interrupts) is a rule of
// its own, apart from who may message whom: an agent the lists let send to
// another may still not interrupt it.
//
// The document's "interrupt" list names who may: agent ids, role:NAME,
// globs or "*", as in the allow lists. Without the list (or with no
// document) only agents of the roles master, orchestrator and supervisor
// may; an empty list lets nobody. Moderators are not the document's
// business: a caller that knows the sender's token grants them the right
// before it asks MayInterrupt.

// DefaultInterruptReason is the refusal when the document gives no
// interrupt list.
const DefaultInterruptReason = "interrupt: " + defaultInterruptWho

const defaultInterruptWho = "only roles master, orchestrator, supervisor may interrupt"

// defaultInterrupt is the rule without an interrupt list: the roles of
// defaultInterruptWho.
var defaultInterrupt = &interruptRule{
	set:    ruleSet{roles: map[string]struct{}{"master": {}, "orchestrator": {}, "supervisor": {}}},
	reason: DefaultInterruptReason,
}

// interruptRule is a compiled interrupt list and its refusal.
type interruptRule struct {
	set    ruleSet
	reason string
}

// compileInterrupt checks the interrupt list at path p (nil: none).
func compileInterrupt(list []string, p string) (*interruptRule, error) {
	if list == nil {
		return nil, nil
	}
	if len(list) > MaxSelectors {
		return nil, fieldErr(p, "%d entries, at most %d", len(list), MaxSelectors)
	}
	ir := &interruptRule{}
	for i, raw := range list {
		sel, err := parseSelector(raw, fmt.Sprintf("%s[%d]", p, i))
		if err != nil {
			return nil, err
		}
		ir.set.add(sel, raw)
	}
	if len(ir.set.shown) == 0 {
		ir.reason = "interrupt: the list is empty, nobody may interrupt"
	} else {
		ir.reason = "interrupt: only " + strings.Join(ir.set.shown, ", ") + " may interrupt"
	}
	return ir, nil
}

// MayInterrupt reports whether from (of role fromRole; "" when not
// registered) may interrupt an agent and, if not, why: a reason that names
// the rule, DefaultInterruptReason or "interrupt: only LIST may
// interrupt" with the document's list. A nil *Compiled (no document) uses
// the default. Like Allows, it is a pure function of the document and
// allocates nothing.
func (r *Compiled) MayInterrupt(from, fromRole string) (bool, string) {
	rule := defaultInterrupt
	if r != nil && r.interrupt != nil {
		rule = r.interrupt
	}
	if rule.set.admits(from, fromRole) {
		return true, ""
	}
	return false, rule.reason
}
