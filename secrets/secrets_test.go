package secrets

import (
	"strings"
	"testing"
)

// Fake credentials, built at run time so this file is not itself a finding
// for repository scanners. Each has the shape and entropy its rule wants.
var (
	githubPAT = "ghp_" + "R8bXw2LqT9vKc4ZmN7yPj3HsDf6GaU1eVo5k"
	awsKey    = "AKIA" + "Z7QW3RTY5UIO2PLK"
	slackBot  = "xoxb-" + "2746513809-1847362950-Kq8Rz3Wm7Tn2Xv5Lp9Bc4Hd1"
)

func TestScanFindsKnownShapes(t *testing.T) {
	for _, tc := range []struct {
		name, text, rule string
	}{
		{"github", "use " + githubPAT + " for the push", "github-pat"},
		{"aws", "export AWS_ACCESS_KEY_ID=" + awsKey, "aws-access-token"},
		{"slack", "bot token " + slackBot, "slack-bot-token"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			text := tc.text
			got, err := Scan(Field{Name: "content.text", Text: &text})
			if err != nil {
				t.Fatal(err)
			}
			if len(got) == 0 {
				t.Fatalf("no finding in %q", tc.text)
			}
			if got[0].Rule != tc.rule || got[0].Field != "content.text" {
				t.Fatalf("finding = %+v, want rule %s in content.text", got[0], tc.rule)
			}
		})
	}
}

func TestScanCleanText(t *testing.T) {
	for _, text := range []string{
		"please review the retry logic in forward.go",
		"token bucket refill is 20/s; see --send-rate",
		"msg-20261121-103000-codex-9f3a61c2 answers the question",
		"",
	} {
		got, err := Scan(Field{Name: "title", Text: &text})
		if err != nil {
			t.Fatal(err)
		}
		if len(got) != 0 {
			t.Errorf("%q: unexpected findings %+v", text, got)
		}
	}
}

func TestScanNamesTheField(t *testing.T) {
	title, text, code := "deploy notes", "all fine", "key := \""+githubPAT+"\""
	got, err := Scan(Field{"title", &title}, Field{"content.text", &text}, Field{"content.code", &code}, Field{"nil", nil})
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 1 || got[0].Field != "content.code" {
		t.Fatalf("findings = %+v, want one in content.code", got)
	}
}

func TestRedactReplacesEverySecretInItsField(t *testing.T) {
	text := "first " + githubPAT + " and again " + githubPAT + "; aws " + awsKey
	other := "unrelated " + githubPAT // not scanned: must stay as it is
	fields := []Field{{"content.text", &text}}
	found, err := Scan(fields...)
	if err != nil {
		t.Fatal(err)
	}
	if len(found) < 2 {
		t.Fatalf("findings = %+v, want the PAT and the AWS key", found)
	}
	Redact(found, append(fields, Field{"content.code", &other})...)
	if strings.Contains(text, githubPAT) || strings.Contains(text, awsKey) {
		t.Fatalf("secret left after redaction: %q", text)
	}
	if strings.Count(text, "[REDACTED:github-pat]") != 2 || !strings.Contains(text, "[REDACTED:aws-access-token]") {
		t.Fatalf("redacted text = %q", text)
	}
	if !strings.Contains(other, githubPAT) {
		t.Fatalf("a field with no finding was changed: %q", other)
	}
	again, err := Scan(fields...)
	if err != nil || len(again) != 0 {
		t.Fatalf("redacted text still has findings %+v (err %v)", again, err)
	}
}

func TestFindingNeverPrintsTheSecret(t *testing.T) {
	text := githubPAT
	found, err := Scan(Field{"content.text", &text})
	if err != nil || len(found) != 1 {
		t.Fatalf("findings %+v, err %v", found, err)
	}
	for _, s := range []string{found[0].Rule, found[0].Description, found[0].Field} {
		if strings.Contains(s, githubPAT) {
			t.Fatalf("exported field carries the secret: %q", s)
		}
	}
}

func BenchmarkScanShortMessage(b *testing.B) {
	text := "please review the retry logic in forward.go; the backoff doubles from 50ms to 2s and gives up after 30s"
	if err := Warm(); err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := Scan(Field{"content.text", &text}); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkScan100KiB(b *testing.B) {
	text := strings.Repeat("the quick brown fox jumps over the lazy dog, then reviews forward.go. ", 100<<10/70)
	if err := Warm(); err != nil {
		b.Fatal(err)
	}
	b.SetBytes(int64(len(text)))
	for b.Loop() {
		if _, err := Scan(Field{"content.text", &text}); err != nil {
			b.Fatal(err)
		}
	}
}
