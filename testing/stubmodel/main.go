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
// before answering), --empty (print nothing, exit 0).
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
	if *sleep > 0 {
		time.Sleep(*sleep)
	}
	if *fail {
		fmt.Fprintln(os.Stderr, "stubmodel: failing as asked (--fail)")
		os.Exit(3)
	}
	if *empty {
		return
	}
	answer := "stub answer to " + messageID(string(prompt))
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
