// Package secrets finds credentials in text before it enters the
// replicated log.
//
// A message is copied to every node and kept until retention trims it, so
// an API key pasted into one leaks everywhere at once (seed 004: never put
// secrets or credentials in messages). The rules are gitleaks' maintained
// default rule set (github.com/zricethezav/gitleaks/v8), run in process on
// the text of the fields a caller names; this package decides nothing
// about policy: the caller refuses or redacts (see the cluster setting
// secret_guard).
//
// The detector is built once per process, on first use (about 0.2 s: it
// compiles some two hundred rules); a scan of a short message costs tens
// of microseconds, because a keyword prefilter skips the rules whose
// keywords the text lacks.
package secrets

import (
	"cmp"
	"context"
	"fmt"
	"io"
	"sort"
	"strings"
	"sync"

	"github.com/rs/zerolog"
	"github.com/zricethezav/gitleaks/v8/detect"
	"github.com/zricethezav/gitleaks/v8/logging"
	"github.com/zricethezav/gitleaks/v8/sources"
)

// Field is one piece of text to scan: Name is what errors call it (the
// API's field name, e.g. "content.text"), Text points at the value, so
// Redact can rewrite it in place.
type Field struct {
	Name string
	Text *string
}

// Finding is one secret found in a field. The secret itself is kept
// unexported: it is never printed, logged or serialized.
type Finding struct {
	// Field is the Field.Name the secret was found in.
	Field string
	// Rule is the gitleaks rule id, e.g. "github-pat", "aws-access-token".
	Rule string
	// Description is the rule's one-line description.
	Description string

	secret string
}

var (
	detOnce sync.Once
	det     *detect.Detector
	detErr  error
)

func detector() (*detect.Detector, error) {
	detOnce.Do(func() {
		// gitleaks logs through a process-wide zerolog logger on stderr;
		// maos logs with slog, and a scan has nothing to report but its
		// findings.
		logging.Logger = zerolog.Nop()
		det, detErr = detect.NewDetectorDefaultConfig()
		if detErr != nil {
			detErr = fmt.Errorf("secrets: load the gitleaks rules: %w", detErr)
		}
	})
	return det, detErr
}

// Warm builds the detector now instead of on the first scan; a node calls
// it at start so the first send does not pay for it. It returns the error
// Scan would.
func Warm() error {
	_, err := detector()
	return err
}

// Scan returns the secrets in fields, in field order then by rule id; nil
// when there are none. An error means the rule set could not be loaded
// (never expected of a release build): callers must treat it as "not
// checked", not as "clean".
func Scan(fields ...Field) ([]Finding, error) {
	d, err := detector()
	if err != nil {
		return nil, err
	}
	var out []Finding
	for _, f := range fields {
		if f.Text == nil || *f.Text == "" {
			continue
		}
		var found []Finding
		for _, g := range d.DetectString(*f.Text) {
			secret := g.Secret
			if secret == "" {
				secret = g.Match
			}
			if secret == "" {
				continue
			}
			found = append(found, Finding{Field: f.Name, Rule: g.RuleID, Description: g.Description, secret: secret})
		}
		sort.SliceStable(found, func(i, j int) bool { return found[i].Rule < found[j].Rule })
		out = append(out, found...)
	}
	return out, nil
}

// ScanReader returns the secrets in the text r yields, named field, read
// to its end in chunks the way gitleaks reads a file (a binary file type
// is not scanned, as gitleaks skips one); r is always drained, so a
// writer feeding it through a pipe never blocks. An error is the rule
// set's (as Scan's) or r's.
func ScanReader(field string, r io.Reader) ([]Finding, error) {
	defer io.Copy(io.Discard, r) //nolint:errcheck // draining only
	d, err := detector()
	if err != nil {
		return nil, err
	}
	var out []Finding
	src := sources.File{Content: r}
	err = src.Fragments(context.Background(), func(fr sources.Fragment, err error) error {
		if err != nil {
			return err
		}
		for _, g := range d.Detect(detect.Fragment(fr)) {
			if secret := cmp.Or(g.Secret, g.Match); secret != "" {
				out = append(out, Finding{Field: field, Rule: g.RuleID, Description: g.Description, secret: secret})
			}
		}
		return nil
	})
	sort.SliceStable(out, func(i, j int) bool { return out[i].Rule < out[j].Rule })
	return out, err
}

// Redact replaces, in the fields the findings name, every occurrence of
// each secret with "[REDACTED:rule]". Longer secrets go first, so a secret
// that contains another is replaced whole.
func Redact(findings []Finding, fields ...Field) {
	byLen := append([]Finding(nil), findings...)
	sort.SliceStable(byLen, func(i, j int) bool { return len(byLen[i].secret) > len(byLen[j].secret) })
	for _, f := range fields {
		if f.Text == nil {
			continue
		}
		for _, g := range byLen {
			if g.Field == f.Name {
				*f.Text = strings.ReplaceAll(*f.Text, g.secret, "[REDACTED:"+g.Rule+"]")
			}
		}
	}
}
