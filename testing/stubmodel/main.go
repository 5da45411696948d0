// Command stubmodel is a stand-in for a model CLI (claude --print, codex
// exec -) in tests and the demo: it reads the prompt on stdin and answers
// deterministically, with no network.
//
// The answer is "stub answer to ID", where ID is the value of the first
// "id: " line of the prompt (the default watcher prompt has one), or
// "sha256:<first 12 hex digits>" of the prompt when there is none.
//
// Flags: --fail (write a line to stderr, exit 3), --hang (start a child
// process that sleeps, then sleep until killed: tests check the whole
// process group dies), --json (print {"result": ANSWER}), --sleep D (wait D
// before answering), --empty (print nothing, exit 0), --progress N (report
// as a task's CLI does, seed 002 §6: N status lines spread over --sleep,
// then the answer, an artifact line and a complete line), --write-artifact
// (with --progress: write the artifact's file, stub/ID.txt under the
// working directory, holding the answer, so the watcher uploads it),
// --requires-approval (with --progress: the complete line asks for
// approval, with a proposed action and a rationale).
package main

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"
	"time"
)

func main() {
	fail := flag.Bool("fail", false, "write an error to stderr and exit 3")
	hang := flag.Bool("hang", false, "spawn a sleeping child and sleep until killed")
	asJSON := flag.Bool("json", false, `print {"result": ANSWER}`)
	sleep := flag.Duration("sleep", 0, "wait this long before answering")
	empty := flag.Bool("empty", false, "print nothing and exit 0")
	steps := flag.Int("progress", 0, "print this many seed 002 §6 status lines over --sleep, then the answer, an artifact and a complete line")
	write := flag.Bool("write-artifact", false, "with --progress: write the artifact's file (stub/ID.txt, the answer) under the working directory")
	gated := flag.Bool("requires-approval", false, "with --progress: complete with requires_approval, a proposed action and a rationale")
	flag.Parse()

	prompt, err := io.ReadAll(os.Stdin)
	if err != nil {
		fmt.Fprintln(os.Stderr, "stubmodel: read stdin:", err)
		os.Exit(2)
	}
	if *hang {
		// A child in the same process group: a timeout must kill it too.
		child := exec.Command("sleep", "3600")
		if err := child.Start(); err == nil {
			fmt.Fprintf(os.Stderr, "stubmodel: child pid %d\n", child.Process.Pid)
		}
		fmt.Printf("pid %d\n", os.Getpid())
		os.Stdout.Sync()
		for {
			time.Sleep(time.Hour)
		}
	}
	for i := 1; i <= *steps; i++ {
		b, _ := json.Marshal(map[string]any{"type": "status", "message": fmt.Sprintf("step %d of %d", i, *steps),
			"progress": float64(i) / float64(*steps+1)})
		fmt.Println(string(b))
		time.Sleep(*sleep / time.Duration(*steps))
	}
	if *sleep > 0 && *steps == 0 {
		time.Sleep(*sleep)
	}
	if *fail {
		fmt.Fprintln(os.Stderr, "stubmodel: failing as asked (--fail)")
		os.Exit(3)
	}
	if *empty {
		return
	}
	id := messageID(string(prompt))
	answer := "stub answer to " + id
	if *steps > 0 {
		report(id, answer, *write, *gated)
		return
	}
	if *asJSON {
		b, _ := json.Marshal(map[string]string{"result": answer})
		fmt.Println(string(b))
		return
	}
	fmt.Println(answer)
}

// messageID returns the value of the prompt's first "id: " line, or a short
// hash of the prompt.
func messageID(prompt string) string {
	for _, line := range strings.Split(prompt, "\n") {
		line = strings.TrimSpace(line)
		if v, ok := strings.CutPrefix(line, "id: "); ok && v != "" {
			return v
		}
	}
	sum := sha256.Sum256([]byte(prompt))
	return "sha256:" + hex.EncodeToString(sum[:])[:12]
}

// report prints a task's end (seed 002 §6): the answer, an artifact line
// naming stub/ID.txt (written first, holding the answer and a newline,
// if write) and a complete line: success, or with gated requires_approval
// proposing {"deploy": ID} with the rationale "stub asks to deploy ID".
func report(id, answer string, write, gated bool) {
	path := "stub/" + id + ".txt"
	if write {
		err := os.MkdirAll("stub", 0o755)
		if err == nil {
			err = os.WriteFile(path, []byte(answer+"\n"), 0o644)
		}
		if err != nil {
			fmt.Fprintln(os.Stderr, "stubmodel: write the artifact:", err)
		}
	}
	art, _ := json.Marshal(map[string]string{"type": "artifact", "path": path, "description": "the stub's answer"})
	end := map[string]any{"type": "complete", "result": "success", "outputs": []string{path}}
	if gated {
		end = map[string]any{"type": "complete", "status": "requires_approval", "result": answer, "outputs": []string{path},
			"proposed_action": map[string]string{"deploy": id}, "rationale": "stub asks to deploy " + id}
	}
	done, _ := json.Marshal(end)
	fmt.Printf("%s\n%s\n%s\n", answer, art, done)
}
