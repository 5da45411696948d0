package maosctl

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/maos-project/maos/api"
	"github.com/maos-project/maos/api/client"
	"github.com/maos-project/maos/artifacts"
)

// defaultArtifactTimeout bounds an artifact's upload or download, which
// the global --timeout (one API call) would cut short for a large file.
const defaultArtifactTimeout = 10 * time.Minute

func artifactCommand() *cli.Command {
	transfer := &cli.DurationFlag{Name: "transfer-timeout", Usage: "give the upload or download `D` at most", Value: defaultArtifactTimeout}
	return &cli.Command{
		Name:  "artifact",
		Usage: "files every node serves: put, get, ls, info, rm (content-addressed, sha256:…)",
		UsageText: `maosctl artifact put|get|ls|info|rm ...

   maosctl artifact put spec/api.yaml --from architect
   maosctl artifact get sha256:9f86d08… -o api.yaml
   maosctl send --from architect --to reviewer --text "please review" --attach spec/api.yaml`,
		Description: `An artifact is an immutable file named by its content: sha256: and the hex
SHA-256 of its bytes. An upload is acknowledged once its bytes are on a
majority of the nodes, so it survives the loss of any minority; every node
serves it, and every read is checked against the id. The same bytes again
store nothing new. A message references artifacts in content.artifacts
(send --attach), and the watchers of its recipients fetch them into the
agent's shared-context folder before the model runs.

Limits: the node's --max-artifact-bytes per file (default 64 MiB) and the
cluster setting artifact_quota_bytes per uploading agent; over either, 413
naming the limit.`,
		Subcommands: []*cli.Command{
			{
				Name:  "put",
				Usage: "upload a file and print its id",
				UsageText: `maosctl artifact put FILE [--name N] [--from A] [--type T]

   maosctl artifact put report.pdf --from analyst`,
				Description: `Uploads FILE and prints its id; with --json the record
{"id","name","content_type","size","from","created","index","refs","existed"}.
--name is the file name it is fetched as (default: FILE's base name), --type
its media type (default by extension, else application/octet-stream),
--from the uploading agent (default: the token's agent; required without
--auth). "existed" (and "(stored already)") says the bytes were there.`,
				Flags: []cli.Flag{
					&cli.StringFlag{Name: "name", Usage: "fetch it as `NAME` (default: the file's base name)"},
					agentFlag("from", "uploading agent `ID`"),
					&cli.StringFlag{Name: "type", Usage: "media `TYPE` (default: by the file's extension)"},
					transfer, jsonFlag(),
				},
				Action: artifactPut,
			},
			{
				Name:  "get",
				Usage: "download an artifact, checked against its id",
				UsageText: `maosctl artifact get ID [-o FILE]

   maosctl artifact get sha256:9f86d08… -o plan.md
   maosctl artifact get sha256:9f86d08… -o - | less`,
				Description: `Downloads artifact ID into FILE (default: its name, in the current folder;
- for stdout), checking the bytes against the id: a mismatch fails and
leaves no file. Prints where it went and which node's copy was served.`,
				Flags: []cli.Flag{
					&cli.StringFlag{Name: "output", Aliases: []string{"o"}, Usage: "write to `FILE` (- for stdout)"},
					transfer, jsonFlag(),
				},
				Action: artifactGet,
			},
			{
				Name:  "ls",
				Usage: "list artifacts, oldest first",
				UsageText: `maosctl artifact ls [--from A] [--name N] [--after INDEX] [--limit N | --all] [--page-size N]

   maosctl artifact ls --from architect`,
				Description: `Lists artifact records in the order they were stored, one a line:
"#INDEX ID NAME SIZE bytes from FROM CREATED refs N" (refs: the stored
messages and tasks that reference it): at most --limit of them, asking
for as many pages as that takes; when more follow, a hint on stderr gives
the --after to go on, and --all lists every one. With --json the records
as one array.`,
				Flags: []cli.Flag{
					&cli.StringFlag{Name: "from", Usage: "only those uploaded by agent `ID`"},
					&cli.StringFlag{Name: "name", Usage: "only those named `NAME`"},
					&cli.Uint64Flag{Name: "after", Usage: "start after log `INDEX`"},
					limitFlag("artifacts", api.DefaultPageLimit),
					pageSizeFlag(),
					allFlag("artifact"),
					strongFlag(), jsonFlag(),
				},
				Action: artifactList,
			},
			{
				Name:  "info",
				Usage: "show an artifact's record",
				UsageText: `maosctl artifact info ID [--strong]

   maosctl artifact info sha256:9f86d08…`,
				Description: `Prints artifact ID's record: name, media type, size, uploader, when and at
which log index it was stored, and how many stored messages and tasks
reference it. With --json the record.`,
				Flags:  []cli.Flag{strongFlag(), jsonFlag()},
				Action: artifactInfo,
			},
			{
				Name:  "rm",
				Usage: "delete an artifact (admin token)",
				UsageText: `maosctl artifact rm ID

   maosctl --token-file admin.token artifact rm sha256:9f86d08…`,
				Description: `Deletes artifact ID's record on every node (an admin token with --auth);
each node then removes its copy of the bytes. A message that references it
keeps the reference, which no longer resolves.`,
				Flags:  []cli.Flag{jsonFlag()},
				Action: artifactRemove,
			},
		},
	}
}

// transferCall is the context of an upload or download: the command's,
// bounded by --transfer-timeout.
func transferCall(c *cli.Context) (context.Context, context.CancelFunc) {
	return within(commandContext(c), c.Duration("transfer-timeout"))
}

func artifactPut(c *cli.Context) error {
	args, err := positionalArgs(c, "file")
	if err != nil {
		return err
	}
	if err := defaultActing(c, "from"); err != nil {
		return err
	}
	ctx, cancel := transferCall(c)
	defer cancel()
	a, err := uploadFile(ctx, apiClient(c), args[0], strings.TrimSpace(c.String("name")), strings.TrimSpace(c.String("from")), strings.TrimSpace(c.String("type")))
	if err != nil {
		return apiError(c, err)
	}
	note := ""
	if a.Existed {
		note = " (stored already)"
	}
	return printResult(c, a, "%s %s %d bytes%s\n", a.ID, a.Name, a.Size, note)
}

// uploadFile is artifacts.Upload with an explicit media type when typ is
// set.
func uploadFile(ctx context.Context, cl *client.Client, path, name, from, typ string) (api.Artifact, error) {
	if typ == "" {
		return artifacts.Upload(ctx, cl, path, name, from)
	}
	f, err := os.Open(path)
	if err != nil {
		return api.Artifact{}, err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return api.Artifact{}, err
	}
	if name == "" {
		name = filepath.Base(path)
	}
	return cl.PutArtifact(ctx, f, st.Size(), api.ArtifactUpload{Name: name, From: from, ContentType: typ})
}

func artifactGet(c *cli.Context) error {
	args, err := positionalArgs(c, "id")
	if err != nil {
		return err
	}
	id := args[0]
	if !api.ValidArtifactID(id) {
		return usagef(c, "%v", api.ArtifactIDError("ID", id))
	}
	cl := apiClient(c)
	out := c.String("output")
	ctx, cancel := transferCall(c)
	defer cancel()
	if out == "-" {
		r, err := cl.OpenArtifact(ctx, id, 0)
		if err != nil {
			return apiError(c, err)
		}
		defer r.Close()
		if _, err := io.Copy(rawWriter(c.App.Writer), r); err != nil {
			return fmt.Errorf("artifact %s: %w (what was written to stdout is not the artifact)", id, err)
		}
		return nil
	}
	dir, name := ".", ""
	if out != "" {
		dir, name = filepath.Dir(out), filepath.Base(out)
	}
	path, size, err := artifacts.Fetch(ctx, cl, id, name, dir)
	if err != nil {
		return apiError(c, err)
	}
	return printResult(c, artifacts.Local{ID: id, Name: filepath.Base(path), Path: path, Size: size}, "%s: %d bytes, checked against %s\n", path, size, id)
}

func artifactList(c *cli.Context) error {
	if err := noArgs(c); err != nil {
		return err
	}
	cl := apiClient(c)
	q := api.ArtifactQuery{From: strings.TrimSpace(c.String("from")), Name: c.String("name")}
	return listPages(c, "artifact ls", "maosctl artifact ls", func(ctx context.Context, after uint64, size int) ([]*api.Artifact, bool, error) {
		q.After, q.Limit = after, size
		p, err := cl.Artifacts(ctx, q, consistency(c))
		return p.Artifacts, p.HasMore, err
	}, func(a *api.Artifact) uint64 { return a.Index }, artifactLine)
}

// artifactLine is one artifact in a listing: "#INDEX ID NAME SIZE bytes
// from FROM CREATED refs N".
func artifactLine(a *api.Artifact) string {
	return fmt.Sprintf("#%d %s %s %d bytes from %s %s refs %d", a.Index, a.ID, a.Name, a.Size, a.From,
		a.Created.UTC().Format(time.RFC3339), a.Refs)
}

func artifactInfo(c *cli.Context) error {
	args, err := positionalArgs(c, "id")
	if err != nil {
		return err
	}
	ctx, cancel := call(c)
	defer cancel()
	a, err := apiClient(c).ArtifactInfo(ctx, args[0], consistency(c))
	if err != nil {
		return apiError(c, err)
	}
	return printResult(c, a, "id: %s\nname: %s\ntype: %s\nsize: %d\nfrom: %s\ncreated: %s\nindex: %d\nrefs: %d\n",
		a.ID, a.Name, a.ContentType, a.Size, a.From, a.Created.Local().Format(time.DateTime), a.Index, a.Refs)
}

func artifactRemove(c *cli.Context) error {
	args, err := positionalArgs(c, "id")
	if err != nil {
		return err
	}
	ctx, cancel := call(c)
	defer cancel()
	a, err := apiClient(c).DeleteArtifact(ctx, args[0])
	if err != nil {
		return apiError(c, err)
	}
	return printResult(c, a, "deleted %s (%s, %d bytes)\n", a.ID, a.Name, a.Size)
}
