package main

import (
	"bufio"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/airlockhq/airlock/card"
)

// defaultHealthURL is the readiness endpoint of `airlock run` listening on
// the default address (config.DefaultListen, ":8080"), seen from inside the
// same container or host.
const defaultHealthURL = "http://127.0.0.1:8080/readyz"

// healthTimeout bounds the whole check, from connecting to the end of the
// answer.
const healthTimeout = 3 * time.Second

// health is `airlock health [-url URL] [-timeout D]`: one GET, exit 0 on a
// 2xx answer and 1 otherwise with a one-line reason on stderr. It is the
// image's HEALTHCHECK, since the slim image has no curl or wget.
//
// Every failure, a bad flag included, exits 1: Docker reserves exit code 2
// of a health check ("do not use").
func health(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("airlock health", flag.ContinueOnError)
	fs.SetOutput(stderr)
	target := fs.String("url", defaultHealthURL, "URL to GET; healthy when it answers 2xx")
	timeout := fs.Duration("timeout", healthTimeout, "bound on the whole request")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		return 1
	}
	fail := func(format string, a ...any) int {
		fmt.Fprintf(stderr, "airlock health: unhealthy: "+format+"\n", a...)
		return 1
	}
	if fs.NArg() > 0 {
		return fail("unexpected argument %q (use -url URL)", fs.Arg(0))
	}
	u, err := url.Parse(*target)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return fail("-url %q is not an http:// or https:// URL", *target)
	}
	if *timeout <= 0 {
		return fail("-timeout must be positive")
	}
	ctx, cancel := context.WithTimeout(ctx, *timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u.String(), nil)
	if err != nil {
		return fail("%s", healthOneLine(err.Error()))
	}
	client := &http.Client{
		// A probe goes straight to the address it is given: no proxy
		// from the environment, no connection kept for a next time.
		Transport: &http.Transport{Proxy: nil, DisableKeepAlives: true},
		// Probes answer directly; a redirect is not a healthy answer.
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}
	resp, err := client.Do(req)
	if err != nil {
		if errors.Is(err, context.DeadlineExceeded) {
			return fail("GET %s: no answer within %s", u.Redacted(), *timeout)
		}
		return fail("%s", healthOneLine(err.Error()))
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		reason := fmt.Sprintf("GET %s: %s", u.Redacted(), resp.Status)
		if line := healthFirstLine(body); line != "" {
			reason += ": " + line
		}
		return fail("%s", reason)
	}
	fmt.Fprintf(stdout, "healthy: GET %s: %s\n", u.Redacted(), resp.Status)
	return 0
}

// healthFirstLine is the first non-empty line of an answer's body, bounded, as
// printable text.
func healthFirstLine(body []byte) string {
	sc := bufio.NewScanner(strings.NewReader(string(body)))
	for sc.Scan() {
		if s := strings.TrimSpace(sc.Text()); s != "" {
			return healthOneLine(s)
		}
	}
	return ""
}

// healthOneLine keeps a reason on one line of printable text, at most 200 runes.
func healthOneLine(s string) string {
	s = strings.Map(func(r rune) rune {
		if r < 0x20 || r == 0x7f {
			return ' '
		}
		return r
	}, s)
	return card.Excerpt(card.OneLine(s), 200)
}
