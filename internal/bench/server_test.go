package bench

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// testHTTP serves as a plain server and mux; cmd/airlock-lab's tests run the
// bench with airlock run's own.
var testHTTP = HTTP{
	Server: func(h http.Handler) *http.Server { return &http.Server{Handler: h} },
	Handler: func(_ Pinger, routes map[string]http.Handler) http.Handler {
		mux := http.NewServeMux()
		for pattern, h := range routes {
			mux.Handle(pattern, h)
		}
		return mux
	},
}

// The bench's Airlock process answers its requests over stdin and stdout,
// says so when a request is unknown, stops when stdin is closed, and
// fails when stdin holds something other than requests.
func TestBenchServerControl(t *testing.T) {
	t.Setenv(ServerEnv, "1") // as airlock bench starts it
	// The flags are checked once it is started so.
	for _, args := range [][]string{{}, {"-dsn", "x.db"}, {"-slack", "http://127.0.0.1:1"}} {
		var out, errOut bytes.Buffer
		if code := Server(context.Background(), args, strings.NewReader(""), &out, &errOut, testHTTP); code != 2 {
			t.Errorf("%v: exit %d, want 2 (%s)", args, code, errOut.String())
		}
	}
	fake := newFakeSlack(1)
	srv, fakeURL, err := serve(testHTTP, fake)
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	start := func() (*io.PipeWriter, *json.Decoder, <-chan int, *bytes.Buffer) {
		inR, inW := io.Pipe()
		outR, outW := io.Pipe()
		var errOut bytes.Buffer
		code := make(chan int, 1)
		go func() {
			code <- Server(context.Background(), []string{"-dsn", filepath.Join(t.TempDir(), "a.db"), "-slack", fakeURL}, inR, outW, &errOut, testHTTP)
			outW.Close()
		}()
		dec := json.NewDecoder(outR)
		var hello serverHello
		if err := dec.Decode(&hello); err != nil || !strings.HasPrefix(hello.Events, "http://127.0.0.1:") || !strings.HasPrefix(hello.Bare, "http://127.0.0.1:") {
			t.Fatalf("hello %+v, %v", hello, err)
		}
		return inW, dec, code, &errOut
	}
	exit := func(code <-chan int) int {
		select {
		case c := <-code:
			return c
		case <-time.After(30 * time.Second):
			t.Fatal("bench-server did not stop")
			return -1
		}
	}

	in, dec, code, _ := start()
	ask := func(req string) controlReply {
		t.Helper()
		if _, err := io.WriteString(in, req+"\n"); err != nil {
			t.Fatal(err)
		}
		var r controlReply
		if err := dec.Decode(&r); err != nil {
			t.Fatal(err)
		}
		return r
	}
	if r := ask(`{"op":"memory","Wait":true}`); r.Error != "" || r.Sample == nil || r.Sample.PID != os.Getpid() || r.Sample.RSS <= 0 {
		t.Errorf("sample: %+v %+v", r, r.Sample)
	}
	// The CPU sample forces no GC: it leaves the memory figures out.
	if r := ask(`{"op":"cpu"}`); r.Error != "" || r.Sample == nil || r.Sample.PID != os.Getpid() || r.Sample.RSS != 0 || r.Sample.Peak <= 0 {
		t.Errorf("cpu: %+v %+v", r, r.Sample)
	}
	if r := ask(`{"op":"format-disk"}`); !strings.Contains(r.Error, `unknown op "format-disk"`) {
		t.Errorf("unknown op answered %+v", r)
	}
	if r := ask(`{"op":"result"}`); r.Error != "" || r.Result == nil || r.Result.ToolRuns != 0 || r.Result.Open != 0 {
		t.Errorf("result: %+v %+v", r, r.Result)
	}
	in.Close()
	if c := exit(code); c != 0 {
		t.Errorf("closing stdin: exit %d, want 0", c)
	}

	in, _, code, errOut := start()
	_, _ = io.WriteString(in, "sample please\n")
	if c := exit(code); c != 1 || !strings.Contains(errOut.String(), "bad request") {
		t.Errorf("a line that is no request: exit %d, want 1; stderr %q", c, errOut.String())
	}
	in.Close()
}
