// allocprog: a Go program whose heap memtap's Go trace import is checked against
// (tests/integration/go, bench/import). It keeps 1000 nodes live before tracing starts, then,
// traced, has two goroutines each allocate -n 64-byte nodes (a list dropped every 64 nodes, so
// the garbage collector frees them) and a 40 KiB []byte every 512 nodes (too large for the
// stack, and for a small size class: each gets its own span), then runs the GC. It prints what
// it allocated while tracing as "key value" lines. With -finished N, N goroutines run and end
// before tracing starts.
package main

import (
	"flag"
	"fmt"
	"os"
	"runtime"
	"runtime/trace"
	"sync"
	"time"
)

// node fills a 64-byte size class slot exactly, and holds a pointer, so it has a type.
type node struct {
	next *node
	pad  [7]uint64
}

var (
	early []*node // made before tracing: in the trace's start snapshot
	sink  [][]byte
	mu    sync.Mutex
	// sinkByte keeps the finished goroutines' allocations from being optimised away.
	sinkByte []byte
)

func work(n int, lists *int, slices *int) {
	var head *node
	for i := 0; i < n; i++ {
		if i%64 == 0 {
			head = nil
			*lists++
		}
		head = &node{next: head}
		if i%512 == 0 {
			b := make([]byte, 40<<10)
			mu.Lock()
			sink = append(sink, b)
			if len(sink) > 4 {
				sink = sink[1:]
			}
			mu.Unlock()
			*slices++
		}
	}
	runtime.KeepAlive(head)
}

func main() {
	n := flag.Int("n", 4000, "nodes per goroutine")
	out := flag.String("o", "allocprog.trace", "the execution trace to write")
	finished := flag.Int("finished", 0, "goroutines that run and end before tracing starts")
	flag.Parse()
	for i := 0; i < 1000; i++ {
		early = append(early, &node{})
	}
	// Goroutines that ended before tracing: after a GC their stacks are freed, and the start
	// snapshot still lists each one, with a stack of size 0.
	// They all live at once (each waits for the last to start), so that each has its own g:
	// dead gs beyond what the Ps keep for reuse go to the scheduler's list, whose stacks the GC
	// frees.
	var done sync.WaitGroup
	start := make(chan struct{})
	for i := 0; i < *finished; i++ {
		done.Add(1)
		go func() {
			defer done.Done()
			<-start
			mu.Lock()
			sinkByte = make([]byte, 64)
			mu.Unlock()
		}()
	}
	close(start)
	done.Wait()
	if *finished > 0 {
		time.Sleep(20 * time.Millisecond) // Done comes before a goroutine's exit
		runtime.GC()
	}
	f, err := os.Create(*out)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	sink = make([][]byte, 0, 8) // before tracing: appends never grow it while traced
	if err := trace.Start(f); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	var wg sync.WaitGroup
	lists := make([]int, 2)
	slices := make([]int, 2)
	for g := 0; g < 2; g++ {
		wg.Add(1)
		go func(g int) {
			defer wg.Done()
			work(*n, &lists[g], &slices[g])
		}(g)
	}
	wg.Wait()
	runtime.GC()
	trace.Stop()
	if err := f.Close(); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	fmt.Printf("nodes %d\n", 2**n)
	fmt.Printf("slices %d\n", slices[0]+slices[1])
	fmt.Printf("early %d\n", len(early))
}
