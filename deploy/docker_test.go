package deploy

import (
	"bufio"
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net"
	"net/url"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/airlockhq/airlock/config"
)

// What the docs (docs/deploy.md) document and the image must agree on.
const (
	configPath = "/etc/airlock/airlock.yaml" // the image's -config
	dataDir    = "/var/lib/airlock"          // WORKDIR and VOLUME: the SQLite database
	imageUID   = 10001                       // the non-root user
	binaryPath = "/usr/local/bin/airlock"
)

// listenPort is the port of the default `listen` (config.DefaultListen).
func listenPort(t *testing.T) int {
	t.Helper()
	_, p, err := net.SplitHostPort(config.DefaultListen)
	if err != nil {
		t.Fatalf("config.DefaultListen %q: %v", config.DefaultListen, err)
	}
	n, err := strconv.Atoi(p)
	if err != nil {
		t.Fatalf("config.DefaultListen %q: %v", config.DefaultListen, err)
	}
	return n
}

// A Dockerfile instruction: its keyword (upper case) and its arguments,
// continuation lines joined.
type instruction struct {
	Cmd  string
	Args string
	Line int
}

type stage struct {
	Name string // the AS name, lower case
	Ins  []instruction
}

// all returns the stage's instructions with keyword cmd.
func (s stage) all(cmd string) []instruction {
	var out []instruction
	for _, in := range s.Ins {
		if in.Cmd == cmd {
			out = append(out, in)
		}
	}
	return out
}

// last returns the stage's last instruction with keyword cmd (the one in
// effect for CMD, ENTRYPOINT, USER, WORKDIR, HEALTHCHECK).
func (s stage) last(t *testing.T, cmd string) instruction {
	t.Helper()
	all := s.all(cmd)
	if len(all) == 0 {
		t.Fatalf("Dockerfile: the final stage has no %s", cmd)
	}
	return all[len(all)-1]
}

// parseDockerfile reads the Dockerfile's stages: comments dropped, lines
// ending in a backslash joined with the next.
func parseDockerfile(t *testing.T, file string) []stage {
	t.Helper()
	data, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	var (
		stages  []stage
		pending strings.Builder
		start   int
	)
	sc := bufio.NewScanner(bytes.NewReader(data))
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		if strings.HasPrefix(line, "#") || (line == "" && pending.Len() == 0) {
			continue // comments (also inside a continued instruction), blank lines
		}
		if pending.Len() == 0 {
			start = n
		}
		if cont, ok := strings.CutSuffix(line, `\`); ok {
			pending.WriteString(cont + " ")
			continue
		}
		pending.WriteString(line)
		text := strings.TrimSpace(pending.String())
		pending.Reset()
		if text == "" {
			continue
		}
		cmd, args, _ := strings.Cut(text, " ")
		in := instruction{Cmd: strings.ToUpper(cmd), Args: strings.TrimSpace(args), Line: start}
		if in.Cmd == "FROM" {
			f := strings.Fields(in.Args)
			st := stage{}
			if len(f) == 3 && strings.EqualFold(f[1], "AS") {
				st.Name = strings.ToLower(f[2])
			}
			stages = append(stages, st)
		}
		if len(stages) == 0 {
			t.Fatalf("Dockerfile:%d: %s before FROM", start, in.Cmd)
		}
		stages[len(stages)-1].Ins = append(stages[len(stages)-1].Ins, in)
	}
	if pending.Len() > 0 {
		t.Fatal("Dockerfile ends in a continued line")
	}
	if len(stages) == 0 {
		t.Fatal("Dockerfile has no FROM")
	}
	return stages
}

// flags splits leading --name=value options off an instruction's arguments.
func flags(args string) (opts []string, rest string) {
	rest = strings.TrimSpace(args)
	for strings.HasPrefix(rest, "--") {
		opt, r, _ := strings.Cut(rest, " ")
		opts = append(opts, opt)
		rest = strings.TrimSpace(r)
	}
	return opts, rest
}

// execForm decodes an instruction's JSON (exec form) arguments.
func execForm(t *testing.T, in instruction, args string) []string {
	t.Helper()
	var argv []string
	if err := json.Unmarshal([]byte(args), &argv); err != nil {
		t.Fatalf("Dockerfile:%d: %s %s: want the exec form [\"...\"]: %v", in.Line, in.Cmd, args, err)
	}
	return argv
}

// mountOptions parses the --mount=... options of a RUN.
func mountOptions(opts []string) []map[string]string {
	var mounts []map[string]string
	for _, o := range opts {
		v, ok := strings.CutPrefix(o, "--mount=")
		if !ok {
			continue
		}
		m := map[string]string{}
		for _, kv := range strings.Split(v, ",") {
			k, val, _ := strings.Cut(kv, "=")
			switch k {
			case "dst", "destination":
				k = "target"
			}
			m[k] = val
		}
		mounts = append(mounts, m)
	}
	return mounts
}

// flagValue is the value after name in argv ("-url X" or "-url=X").
func flagValue(argv []string, name string) (string, bool) {
	for i, a := range argv {
		if a == name && i+1 < len(argv) {
			return argv[i+1], true
		}
		if v, ok := strings.CutPrefix(a, name+"="); ok {
			return v, true
		}
	}
	return "", false
}

// The image's paths, port, user and health check, against the config's
// defaults and docs/deploy.md.
func TestDockerfile(t *testing.T) {
	root := repoRoot(t)
	stages := parseDockerfile(t, filepath.Join(root, "Dockerfile"))
	final := stages[len(stages)-1]
	port := listenPort(t)

	// The binary: copied from the build stage, the entrypoint.
	var buildStage *stage
	var builtAt string
	for _, in := range final.all("COPY") {
		opts, rest := flags(in.Args)
		f := strings.Fields(rest)
		if len(f) == 2 && f[1] == binaryPath {
			for _, o := range opts {
				if from, ok := strings.CutPrefix(o, "--from="); ok {
					builtAt = f[0]
					for i := range stages {
						if stages[i].Name == strings.ToLower(from) {
							buildStage = &stages[i]
						}
					}
				}
			}
		}
	}
	if buildStage == nil {
		t.Fatalf("Dockerfile: no COPY --from=<build stage> ... %s in the final stage", binaryPath)
	}
	ep := final.last(t, "ENTRYPOINT")
	if argv := execForm(t, ep, ep.Args); len(argv) != 1 || argv[0] != binaryPath {
		t.Errorf("Dockerfile:%d: ENTRYPOINT %v, want [%q]", ep.Line, argv, binaryPath)
	}
	cmd := final.last(t, "CMD")
	if argv := execForm(t, cmd, cmd.Args); len(argv) == 0 || argv[0] != "run" {
		t.Errorf("Dockerfile:%d: CMD %v, want airlock run", cmd.Line, argv)
	} else if c, _ := flagValue(argv, "-config"); c != configPath {
		t.Errorf("Dockerfile:%d: CMD %v: -config %q, want %q (the config mount docs/deploy.md shows)", cmd.Line, argv, c, configPath)
	}

	// The build: cgo on (SQLite), module and build caches as cache mounts,
	// its output the file the final stage copies.
	var built bool
	cgoOn := false
	for _, in := range buildStage.Ins {
		if (in.Cmd == "ENV" || in.Cmd == "RUN" || in.Cmd == "ARG") && regexp.MustCompile(`\bCGO_ENABLED=1\b`).MatchString(in.Args) {
			cgoOn = true
		}
		if in.Cmd == "ENV" && strings.Contains(in.Args, "CGO_ENABLED=0") {
			t.Errorf("Dockerfile:%d: CGO_ENABLED=0: SQLite needs cgo", in.Line)
		}
		if in.Cmd != "RUN" || !strings.Contains(in.Args, "go build") {
			continue
		}
		built = true
		opts, rest := flags(in.Args)
		if !strings.Contains(rest, "-o "+builtAt+" ") || !strings.Contains(rest, "./cmd/airlock") {
			t.Errorf("Dockerfile:%d: the go build does not write ./cmd/airlock to %s, which the final stage copies", in.Line, builtAt)
		}
		caches := map[string]bool{}
		for _, m := range mountOptions(opts) {
			if m["type"] == "cache" {
				caches[m["target"]] = true
			}
		}
		for _, dir := range []string{"/go/pkg/mod", "/root/.cache/go-build"} {
			if !caches[dir] {
				t.Errorf("Dockerfile:%d: the go build has no --mount=type=cache,target=%s", in.Line, dir)
			}
		}
	}
	if !built {
		t.Error("Dockerfile: the build stage has no RUN ... go build")
	}
	if !cgoOn {
		t.Error("Dockerfile: the build stage does not set CGO_ENABLED=1 (SQLite needs cgo; a missing gcc would turn it off silently)")
	}
	for _, in := range buildStage.all("RUN") {
		if strings.Contains(in.Args, "go mod download") {
			opts, _ := flags(in.Args)
			found := false
			for _, m := range mountOptions(opts) {
				found = found || (m["type"] == "cache" && m["target"] == "/go/pkg/mod")
			}
			if !found {
				t.Errorf("Dockerfile:%d: go mod download without --mount=type=cache,target=/go/pkg/mod", in.Line)
			}
		}
	}

	// The data directory: the working directory and a volume, so the
	// default SQLite path lands in the volume.
	if wd := final.last(t, "WORKDIR"); wd.Args != dataDir {
		t.Errorf("Dockerfile:%d: WORKDIR %s, want %s", wd.Line, wd.Args, dataDir)
	}
	var volumes []string
	for _, in := range final.all("VOLUME") {
		if strings.HasPrefix(in.Args, "[") {
			volumes = append(volumes, execForm(t, in, in.Args)...)
		} else {
			volumes = append(volumes, strings.Fields(in.Args)...)
		}
	}
	if !contains(volumes, dataDir) {
		t.Errorf("Dockerfile: VOLUME %v, want %s", volumes, dataDir)
	}
	dbPath := config.DefaultSQLiteDSN
	if !path.IsAbs(dbPath) {
		dbPath = path.Join(dataDir, dbPath) // relative to the WORKDIR
	}
	if path.Dir(dbPath) != dataDir {
		t.Errorf("the default database %s (storage.dsn %q) is not in the volume %s", dbPath, config.DefaultSQLiteDSN, dataDir)
	}

	// The port.
	var exposed []string
	for _, in := range final.all("EXPOSE") {
		for _, p := range strings.Fields(in.Args) {
			exposed = append(exposed, strings.TrimSuffix(p, "/tcp"))
		}
	}
	if len(exposed) != 1 || exposed[0] != strconv.Itoa(port) {
		t.Errorf("Dockerfile: EXPOSE %v, want %d (the default listen %q)", exposed, port, config.DefaultListen)
	}

	// The user: uid 10001, by number or by a name created with that uid.
	user := final.last(t, "USER")
	name, _, _ := strings.Cut(user.Args, ":")
	if uid, err := strconv.Atoi(name); err == nil {
		if uid != imageUID {
			t.Errorf("Dockerfile:%d: USER %s, want uid %d", user.Line, user.Args, imageUID)
		}
	} else if uid := useraddUID(final, name); uid != imageUID {
		t.Errorf("Dockerfile:%d: USER %s has uid %d, want %d (useradd --uid %d %s)", user.Line, name, uid, imageUID, imageUID, name)
	}

	// The health check: the binary itself, on the readiness endpoint of
	// the exposed port.
	hc := final.last(t, "HEALTHCHECK")
	_, rest := flags(hc.Args)
	execArgs, ok := strings.CutPrefix(rest, "CMD ")
	if !ok {
		t.Fatalf("Dockerfile:%d: HEALTHCHECK %s: want CMD [...]", hc.Line, hc.Args)
	}
	argv := execForm(t, hc, strings.TrimSpace(execArgs))
	if len(argv) < 2 || argv[0] != binaryPath || argv[1] != "health" {
		t.Fatalf("Dockerfile:%d: HEALTHCHECK CMD %v, want [%q, \"health\", ...] (the slim image has no curl)", hc.Line, argv, binaryPath)
	}
	raw, ok := flagValue(argv, "-url")
	if !ok {
		t.Fatalf("Dockerfile:%d: HEALTHCHECK CMD %v has no -url", hc.Line, argv)
	}
	u, err := url.Parse(raw)
	if err != nil || u.Hostname() != "127.0.0.1" || u.Port() != strconv.Itoa(port) || u.Path != "/readyz" {
		t.Errorf("Dockerfile:%d: HEALTHCHECK -url %s, want http://127.0.0.1:%d/readyz", hc.Line, raw, port)
	}
}

// useraddUID is the --uid (-u) given to `useradd ... NAME` in the stage's
// RUN instructions; -1 if none.
func useraddUID(s stage, name string) int {
	for _, in := range s.all("RUN") {
		for _, part := range regexp.MustCompile(`&&|;|\|\|`).Split(in.Args, -1) {
			f := strings.Fields(part)
			if len(f) < 2 || f[0] != "useradd" || f[len(f)-1] != name {
				continue
			}
			for i, a := range f {
				if (a == "--uid" || a == "-u") && i+1 < len(f) {
					uid, _ := strconv.Atoi(f[i+1])
					return uid
				}
				if v, ok := strings.CutPrefix(a, "--uid="); ok {
					uid, _ := strconv.Atoi(v)
					return uid
				}
			}
		}
	}
	return -1
}

// dockerRunCommands are the docs' `docker run` commands, continuation
// lines joined, split into words.
func dockerRunCommands(doc string) [][]string {
	var (
		cmds    [][]string
		pending string
	)
	for _, line := range strings.Split(doc, "\n") {
		line = strings.TrimSpace(line)
		if cont, ok := strings.CutSuffix(line, `\`); ok {
			pending += cont + " "
			continue
		}
		line, pending = pending+line, ""
		if _, after, ok := strings.Cut(line, "docker run "); ok {
			var words []string
			for _, w := range strings.Fields(after) {
				words = append(words, strings.Trim(w, `"'`))
			}
			cmds = append(cmds, words)
		}
	}
	return cmds
}

// options collects the values of an option given as "-v X", "-v=X",
// "--volume X" or "--volume=X".
func options(words []string, names ...string) []string {
	var out []string
	for i, w := range words {
		for _, n := range names {
			if w == n && i+1 < len(words) {
				out = append(out, words[i+1])
			} else if v, ok := strings.CutPrefix(w, n+"="); ok {
				out = append(out, v)
			}
		}
	}
	return out
}

var namedVolume = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9_.-]*$`)

// The docs say what the image does: docs/deploy.md a `docker run` with
// a named volume on the data directory, the port, and the config mount,
// and where the database lands; docs/configuration.md the defaults of
// listen and storage.dsn.
func TestDocsDocker(t *testing.T) {
	root := repoRoot(t)
	var doc string
	for _, f := range []string{"docs/deploy.md", "docs/configuration.md"} {
		data, err := os.ReadFile(filepath.Join(root, filepath.FromSlash(f)))
		if err != nil {
			t.Fatal(err)
		}
		doc += string(data)
	}
	port := strconv.Itoa(listenPort(t))

	runs := dockerRunCommands(doc)
	if len(runs) == 0 {
		t.Fatal("docs/deploy.md has no `docker run` command")
	}
	var good bool
	var seen []string
	for _, words := range runs {
		seen = append(seen, "docker run "+strings.Join(words, " "))
		var volume, publish, cfg bool
		for _, v := range options(words, "-v", "--volume") {
			parts := strings.Split(v, ":")
			if len(parts) >= 2 && parts[1] == dataDir && namedVolume.MatchString(parts[0]) {
				volume = true
			}
			if len(parts) >= 2 && parts[1] == configPath {
				cfg = true
			}
		}
		for _, p := range options(words, "-p", "--publish") {
			parts := strings.Split(p, ":")
			if len(parts) >= 2 && strings.TrimSuffix(parts[len(parts)-1], "/tcp") == port && parts[len(parts)-2] == port {
				publish = true
			}
		}
		if volume && publish && cfg {
			good = true
		}
	}
	if !good {
		t.Errorf("docs/deploy.md: no `docker run` with all of -v <named volume>:%s, -p %s:%s and -v <file>:%s; found:\n%s",
			dataDir, port, port, configPath, strings.Join(seen, "\n"))
	}
	for _, want := range []string{
		"| `listen` | `" + config.DefaultListen + "` |",
		"| `storage.dsn` | `" + config.DefaultSQLiteDSN + "` |",
		path.Join(dataDir, config.DefaultSQLiteDSN), // where the default database lands in the image
	} {
		if !strings.Contains(doc, want) {
			t.Errorf("docs/deploy.md and docs/configuration.md do not say %q", want)
		}
	}
}

// dockerignore is a .dockerignore's patterns, matched as Docker does: the
// last matching pattern wins, "!" re-includes, a pattern matching a
// directory excludes everything under it, "**" spans directories.
type dockerignore []struct {
	re      *regexp.Regexp
	include bool
}

func parseDockerignore(t *testing.T, file string) dockerignore {
	t.Helper()
	data, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	var d dockerignore
	for _, line := range strings.Split(string(data), "\n") {
		line = strings.TrimSpace(line)
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		include := false
		if rest, ok := strings.CutPrefix(line, "!"); ok {
			include, line = true, strings.TrimSpace(rest)
		}
		line = path.Clean(strings.TrimPrefix(line, "/"))
		var re strings.Builder
		re.WriteString("^")
		for i := 0; i < len(line); i++ {
			switch c := line[i]; {
			case strings.HasPrefix(line[i:], "**/"):
				re.WriteString("(.*/)?")
				i += 2
			case strings.HasPrefix(line[i:], "**"):
				re.WriteString(".*")
				i++
			case c == '*':
				re.WriteString("[^/]*")
			case c == '?':
				re.WriteString("[^/]")
			default:
				re.WriteString(regexp.QuoteMeta(string(c)))
			}
		}
		re.WriteString("$")
		d = append(d, struct {
			re      *regexp.Regexp
			include bool
		}{regexp.MustCompile(re.String()), include})
	}
	return d
}

// excluded reports whether the context path p (slash-separated, relative
// to the context root) is left out of the build context.
func (d dockerignore) excluded(p string) bool {
	out := false
	for _, pat := range d {
		for q := p; q != "." && q != "/"; q = path.Dir(q) {
			if pat.re.MatchString(q) {
				out = !pat.include
				break
			}
		}
	}
	return out
}

// .dockerignore keeps history, local databases, local configs and build
// output out of the build context, and keeps every file the build needs.
func TestDockerignore(t *testing.T) {
	root := repoRoot(t)
	d := parseDockerignore(t, filepath.Join(root, ".dockerignore"))
	for _, p := range []string{
		".git", ".git/config", ".git/objects/ab/cdef",
		"airlock.db", "airlock.db-wal", "airlock.db-shm", "airlock.db-journal", "data/airlock.db", "cmd/airlock/test.db-wal",
		"airlock.yaml", "deploy/airlock.yaml", ".env",
		"airlock", "dist/airlock_linux_amd64", "cmd/airlock/airlock.test", "cover.out",
	} {
		if !d.excluded(p) {
			t.Errorf(".dockerignore: %s is sent to the build context; want it left out", p)
		}
	}
	keep := []string{"go.mod", "go.sum", "Dockerfile", "config.example.yaml"}
	if goTool, err := exec.LookPath("go"); err == nil {
		// Every file of the main module that building ./cmd/airlock reads.
		cmd := exec.Command(goTool, "list", "-deps", "-f",
			`{{if .Module}}{{if .Module.Main}}{{$d := .Dir}}{{range .GoFiles}}{{$d}}/{{.}}
{{end}}{{range .CgoFiles}}{{$d}}/{{.}}
{{end}}{{range .EmbedFiles}}{{$d}}/{{.}}
{{end}}{{end}}{{end}}`, "./cmd/airlock")
		cmd.Dir = root
		out, err := cmd.Output()
		if err != nil {
			t.Fatalf("go list: %v", err)
		}
		for _, f := range strings.Fields(string(out)) {
			rel, err := filepath.Rel(root, f)
			if err != nil {
				t.Fatal(err)
			}
			keep = append(keep, filepath.ToSlash(rel))
		}
		if len(keep) < 20 {
			t.Fatalf("go list found only %v", keep)
		}
	} else {
		t.Log("the go tool is not on PATH: checking only go.mod and go.sum are kept")
	}
	for _, p := range keep {
		if d.excluded(p) {
			t.Errorf(".dockerignore leaves out %s, which the build needs", p)
		}
	}
}

func contains(list []string, s string) bool {
	for _, v := range list {
		if v == s {
			return true
		}
	}
	return false
}

// dockerEngine skips the test unless a Docker engine answers.
func dockerEngine(t *testing.T) string {
	t.Helper()
	if testing.Short() {
		t.Skip("-short: not building the image")
	}
	docker, err := exec.LookPath("docker")
	if err != nil {
		t.Skip("no Docker engine: the docker command is not on PATH")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	out, err := exec.CommandContext(ctx, docker, "info", "--format", "{{.ServerVersion}}").CombinedOutput()
	if err != nil {
		t.Skipf("no Docker engine: `docker info` failed (%v): %s", err, firstNonEmptyLine(string(out)))
	}
	return docker
}

func firstNonEmptyLine(s string) string {
	for _, line := range strings.Split(s, "\n") {
		if line = strings.TrimSpace(line); line != "" {
			return line
		}
	}
	return ""
}

// dockerCLI runs docker commands for one test, bounded in time.
type dockerCLI struct {
	t      *testing.T
	docker string
}

// run runs docker args and returns its trimmed stdout and an error with
// stderr.
func (d dockerCLI) run(timeout time.Duration, args ...string) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, d.docker, args...)
	cmd.Env = append(os.Environ(), "DOCKER_BUILDKIT=1")
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	if err != nil {
		err = fmt.Errorf("docker %s: %w: %s", strings.Join(args, " "), err, strings.TrimSpace(stderr.String()))
	}
	return strings.TrimSpace(stdout.String()), err
}

func (d dockerCLI) must(timeout time.Duration, args ...string) string {
	d.t.Helper()
	out, err := d.run(timeout, args...)
	if err != nil {
		d.t.Fatal(err)
	}
	return out
}

// The image, built and run on a Docker engine: the health check works, the
// process runs as uid 10001, and the default SQLite database lands in the
// named volume and survives the container's removal.
func TestDockerImage(t *testing.T) {
	d := dockerCLI{t: t, docker: dockerEngine(t)}
	root := repoRoot(t)
	suffix := randomSuffix(t)
	image := "airlock-test:" + suffix
	volume := "airlock-test-data-" + suffix

	t.Logf("building %s (cached layers make later builds quick)", image)
	if out, err := d.run(30*time.Minute, "build", "--progress=plain", "-t", image, root); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	t.Cleanup(func() { d.run(time.Minute, "image", "rm", "-f", image) })

	// The image's metadata, as the engine sees it.
	var meta struct {
		User         string
		WorkingDir   string
		Volumes      map[string]struct{}
		ExposedPorts map[string]struct{}
		Healthcheck  struct{ Test []string }
	}
	if err := json.Unmarshal([]byte(d.must(time.Minute, "image", "inspect", "--format", "{{json .Config}}", image)), &meta); err != nil {
		t.Fatal(err)
	}
	port := listenPort(t)
	if _, ok := meta.Volumes[dataDir]; !ok || meta.WorkingDir != dataDir {
		t.Errorf("image: volumes %v, working dir %q; want %s for both", meta.Volumes, meta.WorkingDir, dataDir)
	}
	if _, ok := meta.ExposedPorts[fmt.Sprintf("%d/tcp", port)]; !ok {
		t.Errorf("image: exposed ports %v, want %d/tcp", meta.ExposedPorts, port)
	}
	wantHC := []string{"CMD", binaryPath, "health", "-url", fmt.Sprintf("http://127.0.0.1:%d/readyz", port)}
	if strings.Join(meta.Healthcheck.Test, " ") != strings.Join(wantHC, " ") {
		t.Errorf("image: health check %q, want %q", meta.Healthcheck.Test, wantHC)
	}

	d.must(time.Minute, "volume", "create", volume)
	t.Cleanup(func() { d.run(time.Minute, "volume", "rm", "-f", volume) })

	// The config: no storage section, so the default SQLite path applies;
	// a model server that is never called (no platform sends turns).
	cfgFile := filepath.Join(t.TempDir(), "airlock.yaml")
	if err := os.WriteFile(cfgFile, []byte("model:\n  provider: openai\n  name: test\n  base_url: http://127.0.0.1:9/v1\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	dbFile := path.Join(dataDir, config.DefaultSQLiteDSN)

	// start runs a container of the image on the volume (with the image's
	// own command and health check, checked every second) and waits until
	// Docker reports it healthy.
	start := func(name string) {
		t.Helper()
		t.Cleanup(func() { d.run(time.Minute, "rm", "-f", name) })
		d.must(time.Minute, "create", "--name", name, "--health-interval", "1s", "-v", volume+":"+dataDir, image)
		// docker cp, not a bind mount, so a remote engine works too.
		d.must(time.Minute, "cp", cfgFile, name+":"+configPath)
		d.must(time.Minute, "start", name)
		deadline := time.Now().Add(2 * time.Minute)
		for {
			status, err := d.run(time.Minute, "inspect", "--format", "{{.State.Status}} {{.State.Health.Status}}", name)
			if err != nil {
				t.Fatal(err)
			}
			if status == "running healthy" {
				return
			}
			if !strings.HasPrefix(status, "running") || time.Now().After(deadline) {
				logs, _ := d.run(time.Minute, "logs", name)
				t.Fatalf("container %s: %s, want running and healthy; logs:\n%s", name, status, logs)
			}
			time.Sleep(500 * time.Millisecond)
		}
	}
	// stat is the database file's inode, owner and size in the container.
	stat := func(name string) (inode string, uid, size int) {
		t.Helper()
		out := d.must(time.Minute, "exec", name, "stat", "-c", "%i %u %s", dbFile)
		f := strings.Fields(out)
		if len(f) != 3 {
			t.Fatalf("stat %s: %q", dbFile, out)
		}
		uid, _ = strconv.Atoi(f[1])
		size, _ = strconv.Atoi(f[2])
		return f[0], uid, size
	}

	first := "airlock-test-1-" + suffix
	start(first)
	// The owner of /proc/1 is the user airlock run runs as.
	if uid := d.must(time.Minute, "exec", first, "stat", "-c", "%u", "/proc/1"); uid != strconv.Itoa(imageUID) {
		t.Errorf("airlock run runs as uid %s, want %d", uid, imageUID)
	}
	// The health command itself: 0 with the default URL, 1 with a reason
	// when nothing answers.
	if out := d.must(time.Minute, "exec", first, binaryPath, "health"); !strings.Contains(out, "200") {
		t.Errorf("airlock health: %q", out)
	}
	if _, err := d.run(time.Minute, "exec", first, binaryPath, "health", "-url", "http://127.0.0.1:9/readyz"); err == nil || !strings.Contains(err.Error(), "exit status 1") || !strings.Contains(err.Error(), "unhealthy") {
		t.Errorf("airlock health on a closed port: %v; want exit status 1 and a reason", err)
	}
	inode, uid, size := stat(first)
	if uid != imageUID || size == 0 {
		t.Errorf("%s: owner %d, size %d; want owner %d and a database in it", dbFile, uid, size, imageUID)
	}
	d.must(time.Minute, "stop", first)
	d.must(time.Minute, "rm", first)

	// A new container on the same volume finds the same file: not
	// recreated (same inode), still a database.
	second := "airlock-test-2-" + suffix
	start(second)
	inode2, _, size2 := stat(second)
	if inode2 != inode || size2 == 0 {
		t.Errorf("after removing the container: %s has inode %s and size %d; want inode %s (the same file) and a database", dbFile, inode2, size2, inode)
	}
}

func randomSuffix(t *testing.T) string {
	t.Helper()
	b := make([]byte, 4)
	if _, err := rand.Read(b); err != nil {
		t.Fatal(err)
	}
	return hex.EncodeToString(b)
}
