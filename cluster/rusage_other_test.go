//go:build !unix

package cluster_test

import "time"

// processCPU is not measured here: BenchmarkSend reports 0 CPU per send.
func processCPU() time.Duration { return 0 }
