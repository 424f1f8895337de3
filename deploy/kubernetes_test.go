package deploy

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"path"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/airlockhq/airlock/config"
)

// The parts of Kubernetes objects the tests read; yaml ignores the rest.

type k8sObject struct {
	APIVersion string `yaml:"apiVersion"`
	Kind       string `yaml:"kind"`
	Metadata   struct {
		Name   string            `yaml:"name"`
		Labels map[string]string `yaml:"labels"`
	} `yaml:"metadata"`

	file string
	node *yaml.Node
}

func (o k8sObject) String() string { return fmt.Sprintf("%s %s (%s)", o.Kind, o.Metadata.Name, o.file) }

// intOrString is a port: a number or a port's name.
type intOrString struct {
	Int int
	Str string
}

func (v *intOrString) UnmarshalYAML(n *yaml.Node) error {
	if n.Tag == "!!int" {
		return n.Decode(&v.Int)
	}
	v.Str = n.Value
	return nil
}

func (v intOrString) String() string {
	if v.Str != "" {
		return v.Str
	}
	return strconv.Itoa(v.Int)
}

type labelSelector struct {
	MatchLabels map[string]string `yaml:"matchLabels"`
}

type securityContext struct {
	RunAsUser                *int64 `yaml:"runAsUser"`
	RunAsNonRoot             *bool  `yaml:"runAsNonRoot"`
	ReadOnlyRootFilesystem   *bool  `yaml:"readOnlyRootFilesystem"`
	AllowPrivilegeEscalation *bool  `yaml:"allowPrivilegeEscalation"`
	Capabilities             struct {
		Drop []string `yaml:"drop"`
	} `yaml:"capabilities"`
}

type probe struct {
	HTTPGet *struct {
		Path string      `yaml:"path"`
		Port intOrString `yaml:"port"`
	} `yaml:"httpGet"`
}

type envVar struct {
	Name      string  `yaml:"name"`
	Value     *string `yaml:"value"`
	ValueFrom *struct {
		SecretKeyRef *struct {
			Name string `yaml:"name"`
			Key  string `yaml:"key"`
		} `yaml:"secretKeyRef"`
	} `yaml:"valueFrom"`
}

type container struct {
	Name    string   `yaml:"name"`
	Image   string   `yaml:"image"`
	Command []string `yaml:"command"`
	Args    []string `yaml:"args"`
	Ports   []struct {
		Name          string `yaml:"name"`
		ContainerPort int    `yaml:"containerPort"`
	} `yaml:"ports"`
	Env            []envVar `yaml:"env"`
	EnvFrom        []any    `yaml:"envFrom"`
	ReadinessProbe *probe   `yaml:"readinessProbe"`
	LivenessProbe  *probe   `yaml:"livenessProbe"`
	StartupProbe   *probe   `yaml:"startupProbe"`
	Resources      struct {
		Requests map[string]string `yaml:"requests"`
		Limits   map[string]string `yaml:"limits"`
	} `yaml:"resources"`
	SecurityContext securityContext `yaml:"securityContext"`
	VolumeMounts    []struct {
		Name      string `yaml:"name"`
		MountPath string `yaml:"mountPath"`
		SubPath   string `yaml:"subPath"`
	} `yaml:"volumeMounts"`
}

type volume struct {
	Name      string `yaml:"name"`
	ConfigMap *struct {
		Name  string `yaml:"name"`
		Items []struct {
			Key  string `yaml:"key"`
			Path string `yaml:"path"`
		} `yaml:"items"`
	} `yaml:"configMap"`
	Secret *struct {
		SecretName string `yaml:"secretName"`
		Items      []struct {
			Key  string `yaml:"key"`
			Path string `yaml:"path"`
		} `yaml:"items"`
	} `yaml:"secret"`
}

type deployment struct {
	Spec struct {
		Replicas *int          `yaml:"replicas"`
		Selector labelSelector `yaml:"selector"`
		Template struct {
			Metadata struct {
				Labels map[string]string `yaml:"labels"`
			} `yaml:"metadata"`
			Spec struct {
				TerminationGracePeriodSeconds *int            `yaml:"terminationGracePeriodSeconds"`
				SecurityContext               securityContext `yaml:"securityContext"`
				Containers                    []container     `yaml:"containers"`
				Volumes                       []volume        `yaml:"volumes"`
			} `yaml:"spec"`
		} `yaml:"template"`
	} `yaml:"spec"`
}

type service struct {
	Spec struct {
		Selector map[string]string `yaml:"selector"`
		Ports    []struct {
			Name       string      `yaml:"name"`
			Port       int         `yaml:"port"`
			TargetPort intOrString `yaml:"targetPort"`
		} `yaml:"ports"`
	} `yaml:"spec"`
}

type ingressBackend struct {
	Service *struct {
		Name string `yaml:"name"`
		Port struct {
			Name   string `yaml:"name"`
			Number int    `yaml:"number"`
		} `yaml:"port"`
	} `yaml:"service"`
}

type ingress struct {
	Spec struct {
		DefaultBackend *ingressBackend `yaml:"defaultBackend"`
		Rules          []struct {
			HTTP struct {
				Paths []struct {
					Path    string         `yaml:"path"`
					Backend ingressBackend `yaml:"backend"`
				} `yaml:"paths"`
			} `yaml:"http"`
		} `yaml:"rules"`
	} `yaml:"spec"`
}

type pdb struct {
	Spec struct {
		MinAvailable   *intOrString  `yaml:"minAvailable"`
		MaxUnavailable *intOrString  `yaml:"maxUnavailable"`
		Selector       labelSelector `yaml:"selector"`
	} `yaml:"spec"`
}

type configMap struct {
	Data map[string]string `yaml:"data"`
}

type secret struct {
	Data       map[string]string `yaml:"data"`
	StringData map[string]string `yaml:"stringData"`
}

type kustomization struct {
	Resources []string `yaml:"resources"`
}

// manifests reads every document of every YAML file in deploy/kubernetes.
func manifests(t *testing.T) []k8sObject {
	t.Helper()
	files, err := filepath.Glob(filepath.Join("kubernetes", "*.y*ml"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no manifests in deploy/kubernetes (%v)", err)
	}
	var objs []k8sObject
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		dec := yaml.NewDecoder(bytes.NewReader(data))
		for {
			var n yaml.Node
			if err := dec.Decode(&n); errors.Is(err, io.EOF) {
				break
			} else if err != nil {
				t.Fatalf("%s: %v", f, err)
			}
			var o k8sObject
			if err := n.Decode(&o); err != nil {
				t.Fatalf("%s: %v", f, err)
			}
			o.file, o.node = filepath.Base(f), &n
			if o.APIVersion == "" || o.Kind == "" || (o.Kind != "Kustomization" && o.Metadata.Name == "") {
				t.Errorf("%s: a document without apiVersion, kind or metadata.name", f)
				continue
			}
			objs = append(objs, o)
		}
	}
	return objs
}

// one decodes the only object of kind into v and returns it.
func one(t *testing.T, objs []k8sObject, kind string, v any) k8sObject {
	t.Helper()
	var found []k8sObject
	for _, o := range objs {
		if o.Kind == kind {
			found = append(found, o)
		}
	}
	if len(found) != 1 {
		t.Fatalf("want one %s in deploy/kubernetes, found %d", kind, len(found))
	}
	if err := found[0].node.Decode(v); err != nil {
		t.Fatalf("%s: %v", found[0], err)
	}
	return found[0]
}

// show prints an optional number.
func show(p *int) string {
	if p == nil {
		return "unset"
	}
	return strconv.Itoa(*p)
}

// selects reports whether every label of sel is on labels.
func selects(sel, labels map[string]string) bool {
	if len(sel) == 0 {
		return false
	}
	for k, v := range sel {
		if labels[k] != v {
			return false
		}
	}
	return true
}

// The pieces of a replicated Airlock on PostgreSQL agree with each other,
// with the image, and with the config they carry.
func TestKubernetesManifests(t *testing.T) {
	objs := manifests(t)
	var (
		dep  deployment
		svc  service
		pd   pdb
		cm   configMap
		sec  secret
		kust kustomization
	)
	depObj := one(t, objs, "Deployment", &dep)
	svcObj := one(t, objs, "Service", &svc)
	pdbObj := one(t, objs, "PodDisruptionBudget", &pd)
	cmObj := one(t, objs, "ConfigMap", &cm)
	secObj := one(t, objs, "Secret", &sec)

	// Replicas, and the labels that tie the Service and the budget to them.
	podLabels := dep.Spec.Template.Metadata.Labels
	if r := dep.Spec.Replicas; r == nil || *r < 2 {
		t.Errorf("%s: replicas %s, want 2 or more", depObj, show(r))
	}
	if !selects(dep.Spec.Selector.MatchLabels, podLabels) {
		t.Errorf("%s: selector %v does not select its pods %v", depObj, dep.Spec.Selector.MatchLabels, podLabels)
	}
	if !selects(svc.Spec.Selector, podLabels) {
		t.Errorf("%s: selector %v does not select the pods %v", svcObj, svc.Spec.Selector, podLabels)
	}
	if !selects(pd.Spec.Selector.MatchLabels, podLabels) {
		t.Errorf("%s: selector %v does not select the pods %v", pdbObj, pd.Spec.Selector.MatchLabels, podLabels)
	}
	if m := pd.Spec.MinAvailable; m == nil || m.Str != "" || m.Int != 1 {
		t.Errorf("%s: minAvailable %v, want 1", pdbObj, m)
	} else if r := dep.Spec.Replicas; r != nil && *r <= m.Int {
		t.Errorf("%s: minAvailable %d with %d replicas blocks every drain", pdbObj, m.Int, *r)
	}

	pod := dep.Spec.Template.Spec
	if len(pod.Containers) != 1 {
		t.Fatalf("%s: %d containers, want 1", depObj, len(pod.Containers))
	}
	c := pod.Containers[0]

	// Ports: the container's, the probes', the Service's target, the
	// Ingress's backend.
	if len(c.Ports) != 1 || c.Ports[0].ContainerPort == 0 {
		t.Fatalf("%s: ports %+v, want one containerPort", depObj, c.Ports)
	}
	port := c.Ports[0]
	resolve := func(p intOrString) int {
		if p.Str == "" {
			return p.Int
		}
		if p.Str == port.Name {
			return port.ContainerPort
		}
		return -1
	}
	for _, pr := range []struct {
		name  string
		probe *probe
		path  string
		must  bool
	}{
		{"readinessProbe", c.ReadinessProbe, "/readyz", true},
		{"livenessProbe", c.LivenessProbe, "/healthz", true},
		{"startupProbe", c.StartupProbe, "/healthz", false},
	} {
		switch {
		case pr.probe == nil && !pr.must:
		case pr.probe == nil || pr.probe.HTTPGet == nil:
			t.Errorf("%s: no %s httpGet", depObj, pr.name)
		case pr.probe.HTTPGet.Path != pr.path:
			t.Errorf("%s: %s path %s, want %s", depObj, pr.name, pr.probe.HTTPGet.Path, pr.path)
		case resolve(pr.probe.HTTPGet.Port) != port.ContainerPort:
			t.Errorf("%s: %s port %s, want the container port %d", depObj, pr.name, pr.probe.HTTPGet.Port, port.ContainerPort)
		}
	}
	servicePorts := map[string]bool{}
	for _, p := range svc.Spec.Ports {
		if resolve(p.TargetPort) != port.ContainerPort {
			t.Errorf("%s: targetPort %s, want the container port %d", svcObj, p.TargetPort, port.ContainerPort)
		}
		servicePorts[p.Name], servicePorts[strconv.Itoa(p.Port)] = true, true
	}
	if len(svc.Spec.Ports) == 0 {
		t.Errorf("%s: no ports", svcObj)
	}
	for _, o := range objs {
		if o.Kind != "Ingress" {
			continue
		}
		var ing ingress
		if err := o.node.Decode(&ing); err != nil {
			t.Fatal(err)
		}
		var backends []ingressBackend
		if ing.Spec.DefaultBackend != nil {
			backends = append(backends, *ing.Spec.DefaultBackend)
		}
		var paths []string
		for _, r := range ing.Spec.Rules {
			for _, p := range r.HTTP.Paths {
				paths = append(paths, p.Path)
				backends = append(backends, p.Backend)
			}
		}
		if !contains(paths, "/slack/events") {
			t.Errorf("%s: paths %v, want /slack/events (Slack HTTP mode)", o, paths)
		}
		for _, b := range backends {
			if b.Service == nil || b.Service.Name != svcObj.Metadata.Name {
				t.Errorf("%s: a backend is not the Service %s", o, svcObj.Metadata.Name)
				continue
			}
			p := b.Service.Port.Name
			if p == "" {
				p = strconv.Itoa(b.Service.Port.Number)
			}
			if !servicePorts[p] {
				t.Errorf("%s: backend port %s is not a port of %s", o, p, svcObj)
			}
		}
	}

	// Runs as the image's user, unprivileged, with a read-only root.
	sc := func(get func(securityContext) bool) bool {
		return get(c.SecurityContext) || get(pod.SecurityContext)
	}
	if !sc(func(s securityContext) bool { return s.RunAsUser != nil && *s.RunAsUser == imageUID }) {
		t.Errorf("%s: runAsUser is not %d (the image's user)", depObj, imageUID)
	}
	if c.SecurityContext.RunAsUser != nil && *c.SecurityContext.RunAsUser != imageUID {
		t.Errorf("%s: the container's runAsUser %d, want %d", depObj, *c.SecurityContext.RunAsUser, imageUID)
	}
	if !sc(func(s securityContext) bool { return s.RunAsNonRoot != nil && *s.RunAsNonRoot }) {
		t.Errorf("%s: runAsNonRoot is not true", depObj)
	}
	if s := c.SecurityContext; s.ReadOnlyRootFilesystem == nil || !*s.ReadOnlyRootFilesystem {
		t.Errorf("%s: readOnlyRootFilesystem is not true", depObj)
	}
	if s := c.SecurityContext; s.AllowPrivilegeEscalation == nil || *s.AllowPrivilegeEscalation {
		t.Errorf("%s: allowPrivilegeEscalation is not false", depObj)
	}
	if !contains(c.SecurityContext.Capabilities.Drop, "ALL") {
		t.Errorf("%s: capabilities.drop is not [ALL]", depObj)
	}
	for _, r := range []string{"cpu", "memory"} {
		if c.Resources.Requests[r] == "" {
			t.Errorf("%s: no resources.requests.%s", depObj, r)
		}
	}
	if c.Resources.Limits["memory"] == "" {
		t.Errorf("%s: no resources.limits.memory", depObj)
	}

	// The config file: the ConfigMap, mounted where -config reads it.
	cfgPath := configPath // the image's CMD
	if len(c.Command) > 0 {
		t.Errorf("%s: command %v replaces the image's entrypoint; use args", depObj, c.Command)
	}
	if len(c.Args) > 0 {
		if c.Args[0] != "run" {
			t.Errorf("%s: args %v, want airlock run", depObj, c.Args)
		}
		if v, ok := flagValue(c.Args, "-config"); ok {
			cfgPath = v
		}
	}
	mounted := map[string]string{} // file path in the container → ConfigMap key
	secretDirs := map[string]bool{}
	for _, m := range c.VolumeMounts {
		for _, v := range pod.Volumes {
			if v.Name != m.Name {
				continue
			}
			if v.Secret != nil {
				secretDirs[m.MountPath] = true
			}
			if v.ConfigMap == nil || v.ConfigMap.Name != cmObj.Metadata.Name {
				continue
			}
			if m.SubPath != "" {
				mounted[m.MountPath] = m.SubPath
				continue
			}
			if len(v.ConfigMap.Items) == 0 {
				for k := range cm.Data {
					mounted[path.Join(m.MountPath, k)] = k
				}
			}
			for _, it := range v.ConfigMap.Items {
				mounted[path.Join(m.MountPath, it.Path)] = it.Key
			}
		}
	}
	key, ok := mounted[cfgPath]
	if !ok {
		t.Fatalf("%s: -config %s is not a file of the ConfigMap %s (mounted: %v)", depObj, cfgPath, cmObj.Metadata.Name, mounted)
	}
	if cfgPath != configPath {
		t.Errorf("%s: -config %s, want the image's %s", depObj, cfgPath, configPath)
	}
	cfgText, ok := cm.Data[key]
	if !ok {
		t.Fatalf("%s: no data key %q", cmObj, key)
	}

	// The environment: every ${NAME} the config needs is set, secrets from
	// the Secret by keys it has.
	env := map[string]envVar{}
	for _, e := range c.Env {
		env[e.Name] = e
		switch {
		case e.Value != nil:
		case e.ValueFrom != nil && e.ValueFrom.SecretKeyRef != nil:
			ref := e.ValueFrom.SecretKeyRef
			_, inData := sec.Data[ref.Key]
			_, inString := sec.StringData[ref.Key]
			if ref.Name != secObj.Metadata.Name || !(inData || inString) {
				t.Errorf("%s: env %s: secretKeyRef %s/%s is not a key of %s", depObj, e.Name, ref.Name, ref.Key, secObj)
			}
		default:
			t.Errorf("%s: env %s has neither a value nor a secretKeyRef", depObj, e.Name)
		}
	}
	if len(c.EnvFrom) > 0 {
		t.Errorf("%s: envFrom: list each variable in env, so this test can check them", depObj)
	}
	for k, v := range sec.StringData {
		if !strings.Contains(v, "CHANGE-ME") {
			t.Errorf("%s: stringData.%s is not a placeholder (CHANGE-ME): never commit a real secret", secObj, k)
		}
	}
	if len(sec.Data) > 0 {
		t.Errorf("%s: data: keep placeholders in stringData", secObj)
	}

	refs := configRefs(t, cfgText)
	if len(refs.env) == 0 {
		t.Errorf("%s: the config references no ${NAME}: secrets belong in the Secret", cmObj)
	}
	for _, name := range refs.env {
		if _, ok := env[name]; !ok {
			t.Errorf("%s: the config needs ${%s}, which the Deployment's env does not set", depObj, name)
		}
	}
	// ${file:PATH} must be a file of a mounted Secret; for the check
	// below, it reads a dummy file.
	files := t.TempDir()
	for i, p := range refs.files {
		if !secretDirs[path.Dir(p)] {
			t.Errorf("%s: the config reads ${file:%s}, which is not in a Secret the Deployment mounts", depObj, p)
		}
		dummy := filepath.Join(files, strconv.Itoa(i))
		if err := os.WriteFile(dummy, []byte("dummy-file-secret\n"), 0o600); err != nil {
			t.Fatal(err)
		}
		cfgText = strings.ReplaceAll(cfgText, "${file:"+p+"}", "${file:"+dummy+"}")
	}

	// What `airlock check-config` does in the pod, with only the
	// Deployment's env names set (to dummy values).
	lookup := func(name string) (string, bool) {
		e, ok := env[name]
		switch {
		case !ok:
			return "", false
		case e.Value != nil:
			return *e.Value, true
		case strings.Contains(name, "DATABASE_URL") || strings.Contains(name, "DSN"):
			return "postgres://airlock:dummy@postgres:5432/airlock?sslmode=disable", true
		}
		return "dummy-" + strings.ToLower(name), true
	}
	cfg, err := config.Parse([]byte(cfgText), lookup)
	if err != nil {
		t.Fatalf("%s: the config fails check-config: %v", cmObj, err)
	}
	if cfg.Storage.Driver != "postgres" {
		t.Errorf("%s: storage.driver %q: several replicas need postgres", cmObj, cfg.Storage.Driver)
	}
	if cfg.Slack == nil || cfg.Slack.Mode != "http" {
		t.Errorf("%s: want a slack section in http mode (behind the Ingress)", cmObj)
	}
	_, listen, err := net.SplitHostPort(cfg.Listen)
	if err != nil || listen != strconv.Itoa(port.ContainerPort) {
		t.Errorf("%s: listen %q, want port %d (the containerPort and probes)", cmObj, cfg.Listen, port.ContainerPort)
	}
	// SIGTERM: the drain (shutdown_timeout) and the HTTP server's 5 s fit
	// in the grace period.
	if g := pod.TerminationGracePeriodSeconds; g == nil || time.Duration(*g)*time.Second < cfg.ShutdownTimeout+5*time.Second {
		t.Errorf("%s: terminationGracePeriodSeconds %s, want at least shutdown_timeout (%s) + 5s", depObj, show(g), cfg.ShutdownTimeout)
	}

	// kubectl apply -k: every manifest but the Secret's placeholders.
	var listed []string
	for _, o := range objs {
		if o.Kind == "Kustomization" {
			if err := o.node.Decode(&kust); err != nil {
				t.Fatal(err)
			}
			listed = kust.Resources
		}
	}
	var want []string
	for _, o := range objs {
		if o.Kind != "Kustomization" && o.Kind != "Secret" && !contains(want, o.file) {
			want = append(want, o.file)
		}
	}
	sort.Strings(listed)
	sort.Strings(want)
	if strings.Join(listed, " ") != strings.Join(want, " ") {
		t.Errorf("kustomization.yaml resources %v, want %v (every manifest but %s)", listed, want, secObj.file)
	}
}

// refs are the ${...} references in a config file's values: environment
// variables without a default (which must be set), and files.
type refs struct {
	env, files []string
}

// envRefPattern is config's: ${NAME}, ${NAME:-default}, ${file:PATH}.
var envRefPattern = regexp.MustCompile(`\$\{(file:([^}]+)|([A-Za-z_][A-Za-z0-9_]*)(:-([^}]*))?)\}`)

// configRefs finds the references where config expands them: in the
// values (not keys, not comments) of the parsed YAML.
func configRefs(t *testing.T, text string) refs {
	t.Helper()
	var root yaml.Node
	if err := yaml.Unmarshal([]byte(text), &root); err != nil {
		t.Fatalf("config: %v", err)
	}
	var r refs
	var walk func(n *yaml.Node)
	walk = func(n *yaml.Node) {
		switch n.Kind {
		case yaml.DocumentNode, yaml.SequenceNode:
			for _, c := range n.Content {
				walk(c)
			}
		case yaml.MappingNode:
			for i := 1; i < len(n.Content); i += 2 {
				walk(n.Content[i])
			}
		case yaml.ScalarNode:
			for _, m := range envRefPattern.FindAllStringSubmatch(n.Value, -1) {
				switch {
				case m[2] != "":
					r.files = append(r.files, m[2])
				case m[4] == "" && !contains(r.env, m[3]):
					r.env = append(r.env, m[3])
				}
			}
		}
	}
	walk(&root)
	return r
}

func TestConfigRefs(t *testing.T) {
	r := configRefs(t, "a: ${A}\nb: x${B:-d}y\nc: ${file:/run/secrets/c}\nd: [\"${A} ${C_2}\"]\n# e: ${D}\n${KEY}: v\n")
	if strings.Join(r.env, ",") != "A,C_2" || strings.Join(r.files, ",") != "/run/secrets/c" {
		t.Errorf("env %v files %v", r.env, r.files)
	}
}
