package bench

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"runtime"
	"runtime/debug"
	"runtime/metrics"
	"runtime/pprof"
	"strconv"
	"strings"
	"time"

	"github.com/airlockhq/airlock/adapters/slack"
	"github.com/airlockhq/airlock/confirm"
)

// controlRequest is one of the bench's requests to its Airlock process:
//
//	cpu         its CPU time and peak memory so far (figures)
//	memory      the same with its resident memory after a GC; Wait: once
//	            the adapter's work so far is done; Settle: after returning
//	            the Go runtime's free memory to the system
//	heap        write a heap profile to File
//	cpu-start   start a CPU profile into File; cpu-stop ends it
//	result      the tool's runs (runsResult), once the adapter's work is done
type controlRequest struct {
	Op           string `json:"op"`
	Wait, Settle bool   `json:",omitempty"`
	File         string `json:"file,omitempty"`
}

// controlReply answers a controlRequest.
type controlReply struct {
	Error  string      `json:"error,omitempty"`
	Sample *figures    `json:"sample,omitempty"`
	Result *runsResult `json:"result,omitempty"`
}

// figures is the process's figures.
type figures struct {
	PID      int   `json:"pid"`
	RSS      int64 `json:"rss"`       // memory: VmRSS (or the Go runtime's total), after a GC
	HeapLive int64 `json:"heap_live"` // memory: the Go heap's live bytes, after the same GC
	Peak     int64 `json:"peak"`      // VmHWM
	CPU      int64 `json:"cpu_ns"`    // user and system CPU time so far
	Procs    int   `json:"gomaxprocs"`
}

// runsResult is the bench tool's runs per batch, and how many batches
// are still open.
type runsResult struct {
	Runs     map[string]int `json:"runs"`
	ToolRuns int64          `json:"tool_runs"`
	Open     int            `json:"open"`
}

// control answers the bench's requests in its Airlock process.
type control struct {
	db      confirm.BatchStore // the batches' statuses (runs)
	sa      *slack.Adapter
	tool    *countingTool
	cpuFile *os.File
}

// answer reads the bench's requests from stdin and writes each reply
// to enc, until stdin ends (nil), holds something other than requests,
// or ctx is done (nil).
func (c *control) answer(ctx context.Context, stdin io.Reader, enc *json.Encoder) error {
	reads := readRequests(ctx, stdin)
	for {
		select {
		case <-ctx.Done():
			return nil
		case r := <-reads:
			switch {
			case errors.Is(r.err, io.EOF): // the bench is done, or gone
				return nil
			case r.err != nil:
				return fmt.Errorf("bad request: %w", r.err)
			}
			if err := enc.Encode(c.do(ctx, r.req)); err != nil {
				return err
			}
		}
	}
}

// requestRead is one request read from stdin, or why none could be.
type requestRead struct {
	req controlRequest
	err error
}

// readRequests reads requests beside, so that a signal stops the process
// even while stdin stays open; the first error is the last read.
func readRequests(ctx context.Context, stdin io.Reader) <-chan requestRead {
	reads := make(chan requestRead)
	go func() {
		dec := json.NewDecoder(stdin)
		for {
			var r requestRead
			r.err = dec.Decode(&r.req)
			select {
			case reads <- r:
			case <-ctx.Done():
				return
			}
			if r.err != nil {
				return
			}
		}
	}()
	return reads
}

// do answers one request.
func (c *control) do(ctx context.Context, req controlRequest) controlReply {
	var err error
	reply := controlReply{}
	switch req.Op {
	case "cpu", "memory":
		reply.Sample = c.sample(req)
	case "heap":
		err = heapProfile(req.File)
	case "cpu-start":
		err = c.startCPU(req.File)
	case "cpu-stop":
		err = c.stopCPU()
	case "result":
		reply.Result, err = c.result(ctx)
	default:
		err = fmt.Errorf("unknown op %q", req.Op)
	}
	if err != nil {
		reply.Error = err.Error()
	}
	return reply
}

// sample is the process's figures now: for memory with its resident
// memory after a GC (not for cpu: that GC would count in the span
// measured).
func (c *control) sample(req controlRequest) *figures {
	if req.Wait {
		c.sa.Wait()
	}
	if req.Settle {
		debug.FreeOSMemory()
	}
	s := figures{PID: os.Getpid(), Procs: runtime.GOMAXPROCS(0), CPU: int64(cpuTime()), Peak: peakRSS()}
	if req.Op == "memory" {
		s.RSS, s.HeapLive = memoryNow()
	}
	return &s
}

func (c *control) startCPU(path string) error {
	if c.cpuFile != nil {
		return errors.New("a CPU profile is already being written")
	}
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		f.Close()
		return err
	}
	c.cpuFile = f
	return nil
}

func (c *control) stopCPU() error {
	if c.cpuFile == nil {
		return nil
	}
	pprof.StopCPUProfile()
	err := c.cpuFile.Close()
	c.cpuFile = nil
	return err
}

func (c *control) result(ctx context.Context) (*runsResult, error) {
	c.sa.Wait()
	res := &runsResult{}
	for _, st := range []confirm.BatchStatus{confirm.BatchPending, confirm.BatchDecided, confirm.BatchRunning} {
		ids, err := c.db.BatchesIn(ctx, st)
		if err != nil {
			return nil, err
		}
		res.Open += len(ids)
	}
	c.tool.mu.Lock()
	defer c.tool.mu.Unlock()
	res.Runs, res.ToolRuns = maps.Clone(c.tool.runs), c.tool.n.Load()
	return res, nil
}

// memoryNow returns the resident set and the Go heap's live bytes after
// a GC, so two samples compare what is kept rather than where the GC
// cycle happened to be.
func memoryNow() (rss, heapLive int64) {
	runtime.GC()
	s := []metrics.Sample{{Name: "/gc/heap/live:bytes"}, {Name: "/memory/classes/total:bytes"}, {Name: "/memory/classes/heap/released:bytes"}}
	metrics.Read(s)
	heapLive = int64(s[0].Value.Uint64())
	if v, ok := procStatus("VmRSS"); ok {
		return v, heapLive
	}
	return int64(s[1].Value.Uint64() - s[2].Value.Uint64()), heapLive
}

// cpuTime is the CPU time (user and system) the process has used, from
// /proc/self/stat (in clock ticks, 100 a second); zero where it is missing.
func cpuTime() time.Duration {
	b, err := os.ReadFile("/proc/self/stat")
	if err != nil {
		return 0
	}
	// The fields after the command (which may hold spaces), from field 3.
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return 0
	}
	f := strings.Fields(string(b[i+1:]))
	if len(f) < 13 {
		return 0
	}
	utime, err1 := strconv.ParseInt(f[11], 10, 64)
	stime, err2 := strconv.ParseInt(f[12], 10, 64)
	if err1 != nil || err2 != nil {
		return 0
	}
	return time.Duration(utime+stime) * (time.Second / 100)
}

// peakRSS is the peak resident set (VmHWM), or the Go runtime's total
// where /proc is missing.
func peakRSS() int64 {
	if v, ok := procStatus("VmHWM"); ok {
		return v
	}
	rss, _ := memoryNow()
	return rss
}

// procStatus reads a "kB" field of /proc/self/status, in bytes.
func procStatus(field string) (int64, bool) {
	f, err := os.Open("/proc/self/status")
	if err != nil {
		return 0, false
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		k, v, ok := strings.Cut(sc.Text(), ":")
		if !ok || k != field {
			continue
		}
		n, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
		return n << 10, err == nil
	}
	return 0, false
}

func heapProfile(path string) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	defer f.Close()
	return pprof.Lookup("heap").WriteTo(f, 0)
}
