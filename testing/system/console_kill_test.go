package system

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/maos-project/maos/testing/harness"
)

// The console of a built maosd shows a SIGKILLed node dead: no graceful
// leave, so gossip's failure detection must find it (about 5 s with
// memberlist's LAN timing), and the page, following its cluster view,
// says so without a reload.
func TestConsoleShowsKilledNodeDead(t *testing.T) {
	c := harness.NewCluster(t, harness.Options{Maosd: maosdBin, Nodes: 3})
	harness.NoErr(t, c.WaitReady())
	ctx := browser(t)
	n1, n3 := c.Node("n1"), c.Node("n3")
	browse(t, ctx, 20*time.Second, "the cluster view of n1, n3 alive",
		chromedp.Navigate("http://"+n1.APIAddr()+"/ui/"),
		chromedp.WaitVisible(chromedp.CSS(`nav a[data-tab="cluster"]`)),
		chromedp.Click(chromedp.CSS(`nav a[data-tab="cluster"]`)),
		chromedp.WaitVisible(chromedp.CSS(`#members tr[data-node="n3"] td.status.alive`)))
	harness.NoErr(t, n3.Kill())
	killed := time.Now()
	harness.NoErr(t, harness.WaitFor(30*time.Second, "n3 dead on n1's cluster view", func() error {
		if st := text(ctx, `#members tr[data-node="n3"] td.status`); st != "dead" {
			return fmt.Errorf("n3 shows %q", st)
		}
		return nil
	}))
	t.Logf("n3 shown dead %v after its SIGKILL", time.Since(killed).Round(time.Millisecond))
	if got := text(ctx, `#nodes tr[data-node="n3"] td:nth-child(3)`); !strings.HasPrefix(got, "unreachable") {
		t.Fatalf("n3's status cell %q, want unreachable", got)
	}
}
