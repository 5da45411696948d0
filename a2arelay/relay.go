package a2arelay

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"

	"github.com/a2aproject/a2a-go/v2/a2a"

	"github.com/maos-project/maos/api"
	"github.com/maos-project/maos/api/client"
	"github.com/maos-project/maos/watcher"
)

// Relay is the watcher.Runner of one A2A agent: each invocation is a task
// or a message of Agent, relayed to its remote (api.A2ARemote, read with
// Client, an admin's, at every run, so a new URL or credential counts at
// the next run).
type Relay struct {
	// Agent is the maos agent the remote is.
	Agent string
	// Client reads the agent's remote (an admin token: GET
	// /v1/agents/{id}/a2a), the tasks and their threads, and posts the
	// agent's questions to a task's creator.
	Client *client.Client
	// Dir holds the files of the remote's artifacts until the watcher
	// uploads them: Dir/<task id>, emptied when the task's run starts.
	Dir string
	// Logger, if set, gets a line per relayed task.
	Logger *slog.Logger
}

// ErrorTypeRemote is the error_type of a relayed task that failed every
// attempt: the remote failed, refused or could not be reached; its words
// are the error_message.
const ErrorTypeRemote = "a2a_remote"

// Run relays one invocation: a task (MAOS_TASK_ID in inv.Env) or a
// message (MAOS_MESSAGE_ID). It never panics on what the remote says;
// what went wrong is Result.Err and Stderr, a failed attempt.
func (r *Relay) Run(ctx context.Context, inv watcher.Invocation) watcher.Result {
	o := &out{on: inv.OnLine}
	var err error
	switch task, msg := envOf(inv.Env, "MAOS_TASK_ID"), envOf(inv.Env, "MAOS_MESSAGE_ID"); {
	case task != "":
		err = r.task(ctx, task, o)
	case msg != "":
		err = r.message(ctx, msg, o)
	default:
		err = errors.New("a2arelay: an invocation with neither MAOS_TASK_ID nor MAOS_MESSAGE_ID")
	}
	res := watcher.Result{Stdout: o.String()}
	if err != nil {
		res.Err = err
		res.ErrorType = ErrorTypeRemote
		res.Suggestion = "check the remote A2A agent (maosctl agents show " + r.Agent + ": its url and credential) and its logs; create the task again"
		if r.Logger != nil {
			r.Logger.Warn("a2arelay: run failed", "agent", r.Agent, "err", err)
		}
	}
	return res
}

// envOf is the value of name in env ("NAME=value" entries; the last wins).
func envOf(env []string, name string) string {
	v := ""
	for _, e := range env {
		if s, ok := strings.CutPrefix(e, name+"="); ok {
			v = s
		}
	}
	return v
}

// connect reads the agent's remote and connects to it.
func (r *Relay) connect(ctx context.Context) (*remote, error) {
	rem, err := r.Client.AgentA2A(ctx, r.Agent, api.Strong)
	if err != nil {
		return nil, fmt.Errorf("agent %s's A2A remote: %w", r.Agent, err)
	}
	return connect(ctx, rem)
}

// finish prints the completion of settled remote task t: COMPLETED is a
// complete line, its result the status message's text and the text of
// its artifacts, their files written under dir and named in artifact
// lines; any other state is the error (a failed attempt), the remote's
// words kept.
func finish(t *a2a.Task, dir string, o *out) error {
	if t.Status.State != a2a.TaskStateCompleted {
		msg := messageText(t.Status.Message)
		if msg == "" {
			msg = "(the remote gave no message)"
		}
		return fmt.Errorf("the remote A2A task %s ended %s: %s", t.ID, stateWord(t.Status.State), msg)
	}
	text := []string{}
	if s := messageText(t.Status.Message); s != "" {
		text = append(text, s)
	}
	files, err := writeArtifacts(t.Artifacts, dir, &text)
	if err != nil {
		return err
	}
	for _, f := range files {
		o.json(map[string]any{"type": watcher.LineArtifact, "path": f})
	}
	result := strings.Join(text, "\n\n")
	if result == "" {
		result = "the remote A2A task " + string(t.ID) + " completed"
	}
	o.json(map[string]any{"type": watcher.LineComplete, "status": api.TaskStatusSuccess, "result": result})
	return nil
}

// writeArtifacts writes the raw file parts of arts to files under dir
// (named by the part's filename, else the artifact's name, else
// "artifact-N") and returns their paths; text parts are added to text,
// data parts as their JSON, URL parts as links (the relay fetches
// nothing: the remote's URLs are the caller's to follow).
func writeArtifacts(arts []*a2a.Artifact, dir string, text *[]string) ([]string, error) {
	var files []string
	for i, a := range arts {
		for j, p := range a.Parts {
			switch c := p.Content.(type) {
			case a2a.Text:
				*text = append(*text, string(c))
			case a2a.Data:
				*text = append(*text, dataText(c.Value))
			case a2a.URL:
				*text = append(*text, cmpOr(p.Filename, a.Name, "file")+": "+string(c))
			case a2a.Raw:
				name := filepath.Base(cmpOr(p.Filename, a.Name, fmt.Sprintf("artifact-%d-%d", i+1, j+1)))
				if name == "." || name == string(filepath.Separator) {
					name = fmt.Sprintf("artifact-%d-%d", i+1, j+1)
				}
				path := filepath.Join(dir, fmt.Sprintf("%d-%d-%s", i+1, j+1, name))
				if err := os.MkdirAll(dir, 0o700); err != nil {
					return nil, fmt.Errorf("a2arelay: artifact folder: %w", err)
				}
				if err := os.WriteFile(path, []byte(c), 0o600); err != nil {
					return nil, fmt.Errorf("a2arelay: artifact %s: %w", name, err)
				}
				files = append(files, path)
			}
		}
	}
	return files, nil
}

func cmpOr(s ...string) string {
	for _, v := range s {
		if v != "" {
			return v
		}
	}
	return ""
}
