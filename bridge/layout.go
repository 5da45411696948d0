package bridge

import (
	"fmt"
	"io/fs"
	"path/filepath"
	"sort"
	"strings"

	"github.com/maos-project/maos/dialect"
)

// Layout names the folder layout a message file was found in.
type Layout string

const (
	// LayoutMailbox is {agent}/inbox/*.json and {agent}/outbox/*.json.
	LayoutMailbox Layout = "mailbox"
	// LayoutADR008 is messages/inbox/{agent}/*.json and
	// messages/outbox/{agent}/*.json.
	LayoutADR008 Layout = "adr008"
	// LayoutChannel is {channel}/msg-*.json.
	LayoutChannel Layout = "channel"
)

// File is one candidate message file and what its place says about it.
type File struct {
	Path   string // as found under the root
	Rel    string // relative to the root, slash-separated (names it in reports)
	Layout Layout
	// Box is "inbox" or "outbox" (mailbox and adr008 layouts).
	Box string
	// Agent is the folder's agent: the recipient of an inbox file, the
	// sender of an outbox file.
	Agent string
	// Folder is the channel folder's name (channel layout).
	Folder string
}

// Place is what the file's place says about its message, for
// dialect.Map: its name; the outbox's agent as the sender, the inbox's as
// the recipient; the channel folder's name.
func (f File) Place() dialect.Place {
	p := dialect.Place{FileName: filepath.Base(f.Path)}
	switch {
	case f.Box == "outbox":
		p.Sender = f.Agent
	case f.Box == "inbox":
		p.Recipient = f.Agent
	}
	if f.Layout == LayoutChannel {
		p.Folder = f.Folder
	}
	return p
}

// Scan walks root and classifies every *.json file: files in an inbox/ or
// outbox/ folder (mailbox layout), in messages/{inbox,outbox}/{agent}/
// (adr008), and msg*.json files anywhere else (channel layout). Other files
// (status.json, presence heartbeats) and hidden or .tmp files are returned
// in ignored, by relative path. Files are in path order.
func Scan(root string) (files []File, ignored []string, err error) {
	abs, err := filepath.Abs(root)
	if err != nil {
		return nil, nil, fmt.Errorf("bridge: scan %s: %w", root, err)
	}
	err = filepath.WalkDir(abs, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		name := d.Name()
		if d.IsDir() {
			if p != abs && strings.HasPrefix(name, ".") {
				return filepath.SkipDir
			}
			return nil
		}
		rel, _ := filepath.Rel(abs, p)
		rel = filepath.ToSlash(rel)
		if strings.HasPrefix(name, ".") || !strings.HasSuffix(name, ".json") {
			if !strings.HasPrefix(name, ".") {
				ignored = append(ignored, rel)
			}
			return nil
		}
		f, ok := classify(p)
		if !ok {
			ignored = append(ignored, rel)
			return nil
		}
		f.Path = filepath.Join(root, filepath.FromSlash(rel))
		f.Rel = rel
		files = append(files, f)
		return nil
	})
	if err != nil {
		return nil, nil, fmt.Errorf("bridge: scan %s: %w", root, err)
	}
	sort.Slice(files, func(i, j int) bool { return files[i].Rel < files[j].Rel })
	return files, ignored, nil
}

// classify tells the layout of the file at absolute path p from the names of
// its parent folders.
func classify(p string) (File, bool) {
	dir := filepath.Dir(p)
	parent := filepath.Base(dir)
	grand := filepath.Base(filepath.Dir(dir))
	great := filepath.Base(filepath.Dir(filepath.Dir(dir)))
	switch {
	case isBox(parent):
		return File{Layout: LayoutMailbox, Box: parent, Agent: grand}, true
	case isBox(grand) && great == "messages":
		return File{Layout: LayoutADR008, Box: grand, Agent: parent}, true
	case strings.HasPrefix(filepath.Base(p), "msg"):
		return File{Layout: LayoutChannel, Folder: parent}, true
	}
	return File{}, false
}

func isBox(s string) bool { return s == "inbox" || s == "outbox" }
