package watcher

import (
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"unicode/utf8"

	"github.com/maos-project/maos/api"
)

// Seed 002 §6: a CLI doing a task may report on stdout, one JSON object a
// line, besides (or instead of) its plain-text answer:
//
//	{"type": "status", "message": "Starting API design", "progress": 0.1}
//	{"type": "artifact", "path": "spec/api.yaml", "description": "REST API specification"}
//	{"type": "dependency", "waiting_for": "task-…", "reason": "Need the schema"}
//	{"type": "complete", "result": "success", "outputs": ["api.yaml"]}
//
// A line that is not such an object is text: the task's result.

// The §6 line types.
const (
	LineStatus     = "status"
	LineArtifact   = "artifact"
	LineDependency = "dependency"
	LineComplete   = "complete"
)

// StatusLine is one seed 002 §6 line of a CLI's stdout. Which fields mean
// something depends on Type; a complete line's other fields are
// Completion's.
type StatusLine struct {
	Type string `json:"type"`
	// status
	Message  string   `json:"message,omitempty"`
	Progress *float64 `json:"progress,omitempty"`
	// artifact
	Path        string `json:"path,omitempty"`
	Description string `json:"description,omitempty"`
	// dependency: a task id (the task waits for it) or an agent id
	WaitingFor string `json:"waiting_for,omitempty"`
	Reason     string `json:"reason,omitempty"`
	// Completion is a complete line read as seed 004's task_completion:
	// status, result, confidence_score, outputs, error and the rest. Its
	// "result" may be the status word, as in seed 002's example
	// ("result": "success"): then it is the status and the result is
	// empty.
	Completion *api.TaskCompletion `json:"-"`
}

// ParseStatusLine reads one stdout line: ok is false for text (anything
// but a JSON object whose "type" is status, artifact, dependency or
// complete).
func ParseStatusLine(line string) (l StatusLine, ok bool) {
	line = strings.TrimSpace(line)
	if !strings.HasPrefix(line, "{") || json.Unmarshal([]byte(line), &l) != nil {
		return StatusLine{}, false
	}
	switch l.Type {
	case LineStatus, LineArtifact, LineDependency:
		return l, true
	case LineComplete:
		var c api.TaskCompletion
		if json.Unmarshal([]byte(line), &c) != nil {
			return StatusLine{}, false
		}
		if c.Status == "" && slices.Contains(api.TaskStatuses, c.Result) {
			c.Status, c.Result = c.Result, ""
		}
		l.Completion = &c
		return l, true
	}
	return StatusLine{}, false
}

// Dependency is a dependency line: what the run waits for, and why.
type Dependency struct {
	WaitingFor string
	Reason     string
}

// TaskReport is what one run of a task's CLI said on stdout.
type TaskReport struct {
	// Text is the lines that are not §6 lines, trimmed; a JSON object with
	// a string "result" is that result (as for an answer).
	Text string
	// Outputs are the artifacts' paths, in order, each once.
	Outputs      []string
	Dependencies []Dependency
	// Complete is the last complete line's completion, nil without one.
	Complete *api.TaskCompletion
}

// ParseTaskReport reads a run's whole stdout.
func ParseTaskReport(stdout string) TaskReport {
	var r TaskReport
	var text []string
	for _, line := range strings.Split(stdout, "\n") {
		l, ok := ParseStatusLine(line)
		if !ok {
			text = append(text, strings.TrimSuffix(line, "\r"))
			continue
		}
		switch l.Type {
		case LineArtifact:
			if l.Path != "" && !slices.Contains(r.Outputs, l.Path) {
				r.Outputs = append(r.Outputs, l.Path)
			}
		case LineDependency:
			if l.WaitingFor != "" {
				r.Dependencies = append(r.Dependencies, Dependency{WaitingFor: l.WaitingFor, Reason: l.Reason})
			}
		case LineComplete:
			r.Complete = l.Completion
		}
	}
	r.Text = extractResult(strings.Join(text, "\n"))
	return r
}

// errNoReport is a run that exited 0 but reported nothing: no text, no
// artifact, no dependency, no complete line.
var errNoReport = fmt.Errorf("%w: no text and no seed 002 §6 artifact, dependency or complete line", ErrEmptyOutput)

// empty reports whether the run said nothing a task can use.
func (r TaskReport) empty() bool {
	return r.Text == "" && len(r.Outputs) == 0 && len(r.Dependencies) == 0 && r.Complete == nil
}

// completion is the run's completion: the complete line's (its result,
// when empty, the text; its outputs after the artifacts'), else success
// with the text and the artifacts. executionMS fills an unset
// execution_time_ms.
func (r TaskReport) completion(executionMS int64) api.TaskCompletion {
	c := api.TaskCompletion{Status: api.TaskStatusSuccess}
	if r.Complete != nil {
		c = *r.Complete
		if c.Status == "" {
			c.Status = api.TaskStatusSuccess
		}
	}
	if c.Result == "" {
		c.Result = r.Text
	}
	outs := slices.Clone(r.Outputs)
	for _, o := range c.Outputs {
		if !slices.Contains(outs, o) {
			outs = append(outs, o)
		}
	}
	c.Outputs = outs
	if c.ExecutionTimeMS == 0 {
		c.ExecutionTimeMS = executionMS
	}
	c.Result = cutTail(c.Result, api.MaxTaskTextBytes)
	return c
}

// Error types the watcher reports in a failed completion.
const (
	ErrorTypeCLI               = "cli_error"          // the CLI kept exiting non-zero or could not start
	ErrorTypeCLITimeout        = "cli_timeout"        // the CLI kept outliving the agent's timeout
	ErrorTypeEmptyOutput       = "empty_output"       // the CLI kept reporting nothing
	ErrorTypeBlocked           = "blocked"            // the CLI waits for an agent, which maos cannot wait on
	ErrorTypeInvalidCompletion = "invalid_completion" // the CLI's complete line has a value out of bounds
)

// failedRun is the failure completion of a CLI that failed every attempt:
// error_type by how the last one failed, its error and stderr tail as the
// message, its exit code, the retries.
func failedRun(res Result, attempts int, executionMS int64) api.TaskCompletion {
	typ := ErrorTypeCLI
	switch {
	case res.TimedOut:
		typ = ErrorTypeCLITimeout
	case errors.Is(res.Err, ErrEmptyOutput):
		typ = ErrorTypeEmptyOutput
	}
	if res.ErrorType != "" {
		typ = res.ErrorType
	}
	advice := "check the agent's command and its stderr; create the task again"
	if res.Suggestion != "" {
		advice = res.Suggestion
	}
	msg := res.Err.Error()
	if len(res.Stderr) > 0 {
		msg += "\nlast stderr lines:\n" + strings.Join(res.Stderr, "\n")
	}
	e := &api.TaskError{ErrorType: typ, ErrorMessage: cutRunes(msg, api.MaxTaskNoteRunes),
		RetryCount: attempts - 1, IsRecoverable: true, SuggestedAction: advice}
	if res.ExitCode >= 0 {
		e.ErrorCode = fmt.Sprintf("exit %d", res.ExitCode)
	}
	return api.TaskCompletion{Status: api.TaskStatusFailure, Result: cutTail(msg, api.MaxTaskTextBytes),
		ExecutionTimeMS: executionMS, Error: e}
}

// blocked is the failure completion of a run that only waited for agents
// (a dependency line naming no task): maos waits on tasks, not on agents.
func blocked(deps []Dependency, executionMS int64) api.TaskCompletion {
	var b strings.Builder
	for i, d := range deps {
		if i > 0 {
			b.WriteString("; ")
		}
		b.WriteString("waiting for " + d.WaitingFor)
		if d.Reason != "" {
			b.WriteString(": " + d.Reason)
		}
	}
	msg := cutRunes(b.String(), api.MaxTaskNoteRunes)
	return api.TaskCompletion{Status: api.TaskStatusFailure, Result: msg, ExecutionTimeMS: executionMS,
		Error: &api.TaskError{ErrorType: ErrorTypeBlocked, ErrorMessage: msg, IsRecoverable: true,
			SuggestedAction: cutRunes("hand the task to "+deps[0].WaitingFor+" (maosctl task handoff) or make it depend on that agent's task", api.MaxTaskNoteRunes)}}
}

// invalidCompletion replaces a completion the fsm would refuse with a
// failure naming the field at fault, keeping the result.
func invalidCompletion(c api.TaskCompletion, err error) api.TaskCompletion {
	msg := cutRunes("the CLI's completion was refused: "+err.Error(), api.MaxTaskNoteRunes)
	return api.TaskCompletion{Status: api.TaskStatusFailure, Result: cutTail(c.Result, api.MaxTaskTextBytes),
		ExecutionTimeMS: c.ExecutionTimeMS, Error: &api.TaskError{ErrorType: ErrorTypeInvalidCompletion, ErrorMessage: msg,
			SuggestedAction: "fix the values of the CLI's complete line"}}
}

// cutRunes is s cut to at most n runes.
func cutRunes(s string, n int) string {
	if utf8.RuneCountInString(s) <= n {
		return s
	}
	return string([]rune(s)[:n])
}

// cutTail is the last n bytes of s (whole runes): the end of a long
// output is where a CLI says how it ended.
func cutTail(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return strings.ToValidUTF8(s[len(s)-n:], "")
}
