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
// then the answer, an artifact line and a complete line).
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
		path := "stub/" + id + ".txt"
		art, _ := json.Marshal(map[string]string{"type": "artifact", "path": path, "description": "the stub's answer"})
		done, _ := json.Marshal(map[string]any{"type": "complete", "result": "success", "outputs": []string{path}})
		fmt.Printf("%s\n%s\n%s\n", answer, art, done)
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
