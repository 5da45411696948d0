package fsm

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/hashicorp/raft"
)

func TestWaitAppliedReturnsWhenReached(t *testing.T) {
	f, _ := openTemp(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()

	done := make(chan error, 1)
	go func() { done <- f.WaitApplied(ctx, 3) }()

	for i := uint64(1); i <= 2; i++ {
		applyOne(f, &raft.Log{Type: raft.LogNoop, Index: i})
		select {
		case err := <-done:
			t.Fatalf("WaitApplied(3) returned %v at applied index %d", err, i)
		default:
		}
	}
	// A refused command still advances the index.
	applyOne(f, rawEntry(t, 3, Command{V: 1, Op: "nope", TS: baseTS}))
	if err := <-done; err != nil {
		t.Errorf("WaitApplied(3) = %v, want nil", err)
	}

	// An index already reached returns at once, even with a dead context.
	dead, cancelDead := context.WithCancel(context.Background())
	cancelDead()
	for _, idx := range []uint64{0, 1, 3} {
		if err := f.WaitApplied(dead, idx); err != nil {
			t.Errorf("WaitApplied(%d) at index 3 = %v, want nil", idx, err)
		}
	}
}

func TestWaitAppliedManyWaiters(t *testing.T) {
	f, _ := openTemp(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	const n = 8
	done := make(chan error, n)
	for i := range n {
		go func() { done <- f.WaitApplied(ctx, uint64(i%4+1)) }()
	}
	var logs []*raft.Log
	for i := uint64(1); i <= 4; i++ {
		logs = append(logs, &raft.Log{Type: raft.LogNoop, Index: i})
	}
	f.ApplyBatch(logs[:2])
	f.ApplyBatch(logs[2:])
	for range n {
		if err := <-done; err != nil {
			t.Errorf("WaitApplied: %v", err)
		}
	}
}

func TestWaitAppliedContextEnds(t *testing.T) {
	f, _ := openTemp(t)
	applyOne(f, &raft.Log{Type: raft.LogNoop, Index: 1})

	t.Run("cancelled", func(t *testing.T) {
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error, 1)
		go func() { done <- f.WaitApplied(ctx, 10) }()
		cancel()
		err := <-done
		if !errors.Is(err, context.Canceled) {
			t.Errorf("WaitApplied = %v, want context.Canceled", err)
		}
	})
	t.Run("deadline", func(t *testing.T) {
		ctx, cancel := context.WithTimeout(context.Background(), time.Millisecond)
		defer cancel()
		err := f.WaitApplied(ctx, 10)
		if !errors.Is(err, context.DeadlineExceeded) {
			t.Errorf("WaitApplied = %v, want context.DeadlineExceeded", err)
		}
	})
	t.Run("applies that fall short do not end the wait", func(t *testing.T) {
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error, 1)
		go func() { done <- f.WaitApplied(ctx, 10) }()
		applyOne(f, &raft.Log{Type: raft.LogNoop, Index: 2})
		applyOne(f, &raft.Log{Type: raft.LogNoop, Index: 3})
		select {
		case err := <-done:
			t.Fatalf("WaitApplied(10) returned %v at index 3", err)
		default:
		}
		cancel()
		if err := <-done; !errors.Is(err, context.Canceled) {
			t.Errorf("WaitApplied = %v, want context.Canceled", err)
		}
	})
}
