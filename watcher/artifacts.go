package watcher

import (
	"cmp"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"

	"github.com/maos-project/maos/api"
	"github.com/maos-project/maos/artifacts"
)

// Artifacts (issue 17; seed 002 §1's shared context across hosts). Before
// the CLI runs on a message or a task, every artifact it references is
// fetched into the agent's shared-context folder under its name
// (package artifacts: checked against its id, renamed into place), and
// the prompt lists the local paths. The files a CLI reports with seed
// 002's {"type":"artifact","path":…} lines are uploaded and referenced,
// {id, name}, in its reply or its task's completion.

// SharedContextEnv names the shared-context folder: set for the CLI, and
// read (from the agent's env:, else the watcher's environment) as the
// folder when the YAML sets no shared_context.
const SharedContextEnv = "MAOS_SHARED_CONTEXT"

// SharedContext is the agent's shared-context folder: shared_context in
// its YAML, else MAOS_SHARED_CONTEXT in its env:, else in the watcher's
// environment, else <dir>/<agent>/context, dir the watcher's directory
// (Options.Dir; default $TMPDIR/maos-watcher). It is absolute (a relative
// one taken from the watcher's working directory): the CLI gets it in
// MAOS_SHARED_CONTEXT and the prompt names files in it, and the CLI runs
// in the agent's workdir, where a relative path means another folder.
func (a *AgentConfig) SharedContext(dir string) string {
	p := ""
	switch {
	case a.SharedContextDir != "":
		p = a.SharedContextDir
	case a.Env[SharedContextEnv] != "":
		p = a.Env[SharedContextEnv]
	case os.Getenv(SharedContextEnv) != "":
		p = os.Getenv(SharedContextEnv)
	default:
		if dir == "" {
			dir = filepath.Join(os.TempDir(), "maos-watcher")
		}
		p = filepath.Join(dir, a.ID, "context")
	}
	if abs, err := filepath.Abs(p); err == nil {
		return abs
	}
	return p
}

// fetchAttachments fetches the artifacts refs names into the agent's
// shared context; a failure is logged and kept in its entry (the prompt
// says the file could not be fetched) rather than holding the message up.
func (w *agentWatcher) fetchAttachments(ctx context.Context, what string, refs []api.ArtifactRef) []artifacts.Local {
	has := false
	for _, r := range refs {
		if r.ArtifactID() != "" {
			has = true
			break
		}
	}
	if !has {
		return nil
	}
	dir := w.cfg.SharedContext(w.opts.Dir)
	got, err := artifacts.FetchRefs(ctx, w.c, refs, dir)
	if err != nil {
		return got
	}
	for _, l := range got {
		if l.Err != "" {
			w.log.Warn("watcher: an artifact could not be fetched", "for", what, "artifact", l.ID, "err", l.Err)
		} else {
			w.log.Info("watcher: artifact fetched", "for", what, "artifact", l.ID, "path", l.Path)
		}
	}
	return got
}

// taskRefs are the artifacts a task references: the "artifacts" list of
// its context object (entries as in content.artifacts), if it has one.
func taskRefs(t *api.Task) []api.ArtifactRef {
	var c struct {
		Artifacts []api.ArtifactRef `json:"artifacts"`
	}
	if len(t.Context) == 0 || json.Unmarshal(t.Context, &c) != nil {
		return nil
	}
	return c.Artifacts
}

// attachOutputs reads the seed 002 §6 lines of a plain reply's stdout:
// it uploads the files the artifact lines named (a relative path is the
// CLI's, under workdir) as from and references them in r, keeps a
// complete line's result (when there is no text) and rationale, and takes
// the §6 lines out of r's text; a file that cannot be uploaded is named
// in the text instead. With neither an artifact nor a complete line, r is
// left as it is.
func (w *agentWatcher) attachOutputs(ctx context.Context, r *api.Message, stdout, workdir, from string) {
	rep := ParseTaskReport(stdout)
	if len(rep.Outputs) == 0 && rep.Complete == nil {
		return
	}
	refs, failed := artifacts.UploadPaths(ctx, w.c, workdirOrCwd(workdir), from, rep.Outputs)
	r.Content.Artifacts = append(r.Content.Artifacts, refs...)
	text := rep.Text
	if c := rep.Complete; c != nil {
		if text == "" {
			text = cmp.Or(c.Result, c.Status)
		}
		if c.Rationale != "" {
			text = strings.TrimSpace(text + "\n\nrationale: " + c.Rationale)
		}
	}
	if text == "" {
		var names []string
		for _, ref := range refs {
			names = append(names, ref.Name)
		}
		text = "attached: " + strings.Join(names, ", ")
	}
	if len(failed) > 0 {
		w.log.Warn("watcher: artifacts not uploaded", "reply", r.ID, "failed", failed)
		text += "\n(not attached: " + strings.Join(failed, "; ") + ")"
	}
	r.Content.Text = text
}

// uploadOutputs uploads a completion's outputs that are files (relative
// paths under workdir) and puts their artifact ids in their place; other
// outputs (URLs, ids, missing files) stay as they are.
func (w *agentWatcher) uploadOutputs(ctx context.Context, c *api.TaskCompletion, workdir string) {
	dir := workdirOrCwd(workdir)
	for i, o := range c.Outputs {
		p := o
		if !filepath.IsAbs(p) {
			p = filepath.Join(dir, o)
		}
		if st, err := os.Stat(p); err != nil || !st.Mode().IsRegular() {
			continue
		}
		refs, failed := artifacts.UploadPaths(ctx, w.c, dir, w.cfg.ID, []string{p})
		if len(refs) == 1 {
			c.Outputs[i] = refs[0].Ref
			continue
		}
		w.log.Warn("watcher: task output not uploaded", "output", o, "failed", failed)
	}
}

func workdirOrCwd(dir string) string {
	if dir != "" {
		return dir
	}
	wd, _ := os.Getwd()
	return wd
}
