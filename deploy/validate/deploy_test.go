package validate

import (
	"bufio"
	"bytes"
	"debug/elf"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/hashicorp/hcl/v2"
	"github.com/hashicorp/hcl/v2/hclparse"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	kjson "sigs.k8s.io/json"
	"sigs.k8s.io/yaml"
)

// manifests are the decoded Kubernetes objects of deploy/kubernetes.
type manifests struct {
	deployment *appsv1.Deployment
	service    *corev1.Service
	configMap  *corev1.ConfigMap
	secret     *corev1.Secret
	pdb        *policyv1.PodDisruptionBudget
}

// decodeStrict decodes one document into the API type its apiVersion and
// kind name; unknown fields, duplicate fields and unknown kinds fail.
func decodeStrict(doc []byte, m *manifests) error {
	var tm v1.TypeMeta
	if err := yaml.Unmarshal(doc, &tm); err != nil {
		return err
	}
	var into any
	switch tm.APIVersion + " " + tm.Kind {
	case "apps/v1 Deployment":
		m.deployment = &appsv1.Deployment{}
		into = m.deployment
	case "v1 Service":
		m.service = &corev1.Service{}
		into = m.service
	case "v1 ConfigMap":
		m.configMap = &corev1.ConfigMap{}
		into = m.configMap
	case "v1 Secret":
		m.secret = &corev1.Secret{}
		into = m.secret
	case "policy/v1 PodDisruptionBudget":
		m.pdb = &policyv1.PodDisruptionBudget{}
		into = m.pdb
	default:
		return fmt.Errorf("unexpected object %s %s", tm.APIVersion, tm.Kind)
	}
	// As the API server decodes: field names match case-sensitively, and
	// an unknown or duplicate field is an error.
	js, err := yaml.YAMLToJSONStrict(doc)
	if err != nil {
		return err
	}
	strict, err := kjson.UnmarshalStrict(js, into, kjson.DisallowUnknownFields)
	if err != nil {
		return err
	}
	return errors.Join(strict...)
}

func loadManifests(t *testing.T) manifests {
	t.Helper()
	files, err := filepath.Glob("../kubernetes/*.yaml")
	if err != nil || len(files) == 0 {
		t.Fatalf("no manifests in deploy/kubernetes: %v", err)
	}
	var m manifests
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		r := utilyaml.NewYAMLReader(bufio.NewReader(bytes.NewReader(b)))
		for i := 1; ; i++ {
			doc, err := r.Read()
			if errors.Is(err, io.EOF) {
				break
			}
			if err != nil {
				t.Fatalf("%s: %v", f, err)
			}
			if len(bytes.TrimSpace(stripComments(doc))) == 0 {
				continue
			}
			if err := decodeStrict(doc, &m); err != nil {
				t.Errorf("%s, document %d: %v", f, i, err)
			}
		}
	}
	for name, missing := range map[string]bool{
		"Deployment": m.deployment == nil, "Service": m.service == nil, "ConfigMap": m.configMap == nil,
		"Secret": m.secret == nil, "PodDisruptionBudget": m.pdb == nil,
	} {
		if missing {
			t.Errorf("deploy/kubernetes has no %s", name)
		}
	}
	if t.Failed() {
		t.FailNow()
	}
	return m
}

func stripComments(doc []byte) []byte {
	var out []byte
	for _, l := range bytes.Split(doc, []byte("\n")) {
		if !bytes.HasPrefix(bytes.TrimSpace(l), []byte("#")) {
			out = append(append(out, l...), '\n')
		}
	}
	return out
}

// The strict decoder is strict: a misspelt field fails.
func TestDecodeStrictRefusesUnknownFields(t *testing.T) {
	doc := []byte("apiVersion: v1\nkind: Service\nmetadata:\n  name: x\nspec:\n  selektor:\n    a: b\n")
	if err := decodeStrict(doc, &manifests{}); err == nil || !strings.Contains(err.Error(), "selektor") {
		t.Errorf("decodeStrict with a misspelt field = %v, want an error naming it", err)
	}
	doc = []byte("apiVersion: v1\nkind: Service\nmetadata:\n  name: x\nspec:\n  sessionaffinity: ClientIP\n")
	if err := decodeStrict(doc, &manifests{}); err == nil || !strings.Contains(err.Error(), "sessionaffinity") {
		t.Errorf("decodeStrict with a field in the wrong case = %v, want an error naming it", err)
	}
	if err := decodeStrict([]byte("apiVersion: v1\nkind: Pod\n"), &manifests{}); err == nil {
		t.Error("decodeStrict of an unexpected kind = nil, want an error")
	}
}

func TestKubernetesManifests(t *testing.T) {
	m := loadManifests(t)
	d := m.deployment
	pod := d.Spec.Template
	if d.Spec.Replicas == nil || *d.Spec.Replicas < 2 {
		t.Errorf("Deployment replicas = %v, want at least 2", d.Spec.Replicas)
	}
	matches := func(what string, sel map[string]string) {
		if len(sel) == 0 {
			t.Errorf("%s selects nothing", what)
		}
		for k, v := range sel {
			if pod.Labels[k] != v {
				t.Errorf("%s selects %s=%s, which the pod template's labels %v lack", what, k, v, pod.Labels)
			}
		}
	}
	matches("the Deployment", d.Spec.Selector.MatchLabels)
	matches("the Service", m.service.Spec.Selector)
	matches("the PodDisruptionBudget", m.pdb.Spec.Selector.MatchLabels)

	if len(pod.Spec.Containers) != 1 {
		t.Fatalf("pod has %d containers, want 1", len(pod.Spec.Containers))
	}
	c := pod.Spec.Containers[0]
	port := map[string]int32{}
	for _, p := range c.Ports {
		port[p.Name] = p.ContainerPort
	}
	if port["http"] == 0 {
		t.Fatal("the container has no port named http")
	}
	if got := flag(c.Args, "--http"); got != "0.0.0.0:"+strconv.Itoa(int(port["http"])) {
		t.Errorf("--http = %q, want 0.0.0.0:%d (the http port)", got, port["http"])
	}
	for _, sp := range m.service.Spec.Ports {
		if sp.TargetPort.String() != "http" {
			t.Errorf("Service port %s targets %s, want the container's http port", sp.Name, sp.TargetPort.String())
		}
	}

	// Probes: liveness and startup on /healthz, readiness on /readyz.
	for name, tc := range map[string]struct {
		p    *corev1.Probe
		path string
	}{"livenessProbe": {c.LivenessProbe, "/healthz"}, "startupProbe": {c.StartupProbe, "/healthz"}, "readinessProbe": {c.ReadinessProbe, "/readyz"}} {
		if tc.p == nil || tc.p.HTTPGet == nil {
			t.Errorf("%s is missing or not an httpGet", name)
			continue
		}
		if tc.p.HTTPGet.Path != tc.path || tc.p.HTTPGet.Port.String() != "http" {
			t.Errorf("%s = GET %s on %s, want GET %s on http", name, tc.p.HTTPGet.Path, tc.p.HTTPGet.Port.String(), tc.path)
		}
	}

	// Non-root, read-only root file system, nothing to escalate to.
	psc, sc := pod.Spec.SecurityContext, c.SecurityContext
	if psc == nil || psc.RunAsNonRoot == nil || !*psc.RunAsNonRoot || psc.RunAsUser == nil || *psc.RunAsUser == 0 {
		t.Error("the pod must run as a non-root user (runAsNonRoot, runAsUser)")
	}
	if sc == nil || sc.ReadOnlyRootFilesystem == nil || !*sc.ReadOnlyRootFilesystem {
		t.Error("the container's root file system must be read-only")
	}
	if sc == nil || sc.AllowPrivilegeEscalation == nil || *sc.AllowPrivilegeEscalation || sc.Capabilities == nil || !slices.Contains(sc.Capabilities.Drop, "ALL") {
		t.Error("the container must not escalate privileges and must drop every capability")
	}

	// The config: the ConfigMap's config.hcl is mounted where --config
	// points; data_dir lies in a writable, memory-backed volume.
	mounts := map[string]corev1.VolumeMount{}
	for _, vm := range c.VolumeMounts {
		mounts[vm.Name] = vm
	}
	volumes := map[string]corev1.Volume{}
	for _, v := range pod.Spec.Volumes {
		volumes[v.Name] = v
		if _, ok := mounts[v.Name]; !ok {
			t.Errorf("volume %s is not mounted", v.Name)
		}
	}
	for name := range mounts {
		if _, ok := volumes[name]; !ok {
			t.Errorf("mount %s names no volume", name)
		}
	}
	cfgPath := flag(c.Args, "--config")
	found := false
	for name, vm := range mounts {
		v := volumes[name]
		if v.ConfigMap != nil && v.ConfigMap.Name == m.configMap.Name && filepath.Join(vm.MountPath, "config.hcl") == cfgPath {
			found = true
		}
	}
	if !found {
		t.Errorf("--config %s is not the ConfigMap %s's config.hcl mounted", cfgPath, m.configMap.Name)
	}
	if _, ok := m.configMap.Data["config.hcl"]; !ok {
		t.Fatal("the ConfigMap has no config.hcl")
	}
	dataDir := hclString(t, m.configMap.Data["config.hcl"], "data_dir")
	writable := false
	for name, vm := range mounts {
		v := volumes[name]
		if strings.HasPrefix(dataDir, vm.MountPath+"/") && v.EmptyDir != nil && v.EmptyDir.Medium == corev1.StorageMediumMemory && !vm.ReadOnly {
			writable = true
		}
	}
	if !writable {
		t.Errorf("data_dir %s is not inside a writable memory-backed emptyDir (a tmpfs, mode 1777: a disk emptyDir is 0777, which the host refuses above data_dir)", dataDir)
	}

	// Every secret the container reads exists in the Secret.
	secretKeys := map[string]bool{}
	for k := range m.secret.StringData {
		secretKeys[k] = true
	}
	for k := range m.secret.Data {
		secretKeys[k] = true
	}
	env := map[string]string{}
	for _, e := range c.Env {
		env[e.Name] = e.Value
		if r := e.ValueFrom; r != nil && r.SecretKeyRef != nil {
			if r.SecretKeyRef.Name != m.secret.Name || !secretKeys[r.SecretKeyRef.Key] {
				t.Errorf("env %s reads secret %s key %s, which deploy/kubernetes does not define", e.Name, r.SecretKeyRef.Name, r.SecretKeyRef.Key)
			}
		}
	}
	for _, v := range pod.Spec.Volumes {
		if v.Secret == nil {
			continue
		}
		for _, it := range v.Secret.Items {
			if v.Secret.SecretName != m.secret.Name || !secretKeys[it.Key] {
				t.Errorf("volume %s reads secret %s key %s, which deploy/kubernetes does not define", v.Name, v.Secret.SecretName, it.Key)
			}
		}
	}
	if env["SWITCHBOARD_PROJECT_DIR"] == "" {
		t.Error("the config's project_dir = env(\"SWITCHBOARD_PROJECT_DIR\") needs the variable")
	}
}

// flag is the value after name in args.
func flag(args []string, name string) string {
	if i := slices.Index(args, name); i >= 0 && i+1 < len(args) {
		return args[i+1]
	}
	return ""
}

// hclString is the literal string attribute name of an HCL config.
func hclString(t *testing.T, src, name string) string {
	t.Helper()
	f, diags := hclparse.NewParser().ParseHCL([]byte(src), "config.hcl")
	if diags.HasErrors() {
		t.Fatal(diags)
	}
	attrs, _ := f.Body.JustAttributes()
	a, ok := attrs[name]
	if !ok {
		t.Fatalf("config.hcl has no %s", name)
	}
	v, diags := a.Expr.Value(nil)
	if diags.HasErrors() {
		t.Fatalf("config.hcl %s is not a literal: %v", name, diags)
	}
	return v.AsString()
}

// switchboard is the host binary: $SWITCHBOARD (make deploy-check builds
// it), else built from the repository now.
func switchboard(t *testing.T) string {
	t.Helper()
	if p := os.Getenv("SWITCHBOARD"); p != "" {
		return p
	}
	out := filepath.Join(t.TempDir(), "switchboard")
	cmd := exec.Command("go", "build", "-o", out, "./host/cmd/switchboard")
	cmd.Dir = "../.."
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("building switchboard: %v\n%s", err, b)
	}
	return out
}

// The ConfigMap's config passes `switchboard validate` with what the
// Deployment gives it (the Secret's connection string, the project
// folder); without the connection string it names what to set.
func TestConfigMapValidates(t *testing.T) {
	m := loadManifests(t)
	dir := t.TempDir()
	cfg := filepath.Join(dir, "config.hcl")
	if err := os.WriteFile(cfg, []byte(m.configMap.Data["config.hcl"]), 0o600); err != nil {
		t.Fatal(err)
	}
	bin := switchboard(t)
	run := func(env ...string) (string, error) {
		cmd := exec.Command(bin, "validate", "--config", cfg)
		cmd.Env = append(os.Environ(), env...)
		b, err := cmd.CombinedOutput()
		return string(b), err
	}
	project := t.TempDir()
	out, err := run("SWITCHBOARD_STORE_DSN="+m.secret.StringData["store-dsn"], "SWITCHBOARD_PROJECT_DIR="+project)
	if err != nil || !strings.Contains(out, "is valid") {
		t.Errorf("switchboard validate on the ConfigMap's config: %v\n%s", err, out)
	}
	out, err = run("SWITCHBOARD_STORE_DSN=", "SWITCHBOARD_PROJECT_DIR="+project)
	if err == nil || !strings.Contains(out, "connection string is empty") {
		t.Errorf("validate without the store's connection string = %v\n%s; want it to say what to set", err, out)
	}
}

// The binaries the image holds are static: the distroless static base has
// no C library or dynamic loader.
func TestBinariesAreStatic(t *testing.T) {
	bins := []string{switchboard(t)}
	if p := os.Getenv("SWITCHBOARD_SANDBOX"); p != "" {
		bins = append(bins, p)
	}
	for _, p := range bins {
		f, err := elf.Open(p)
		if err != nil {
			t.Fatal(err)
		}
		for _, prog := range f.Progs {
			if prog.Type == elf.PT_INTERP {
				t.Errorf("%s asks for a dynamic loader: build it with CGO_ENABLED=0", p)
			}
		}
		if libs, _ := f.ImportedLibraries(); len(libs) > 0 {
			t.Errorf("%s needs shared libraries %v", p, libs)
		}
		f.Close()
	}
}

// The Dockerfile: a static build, a distroless or scratch final stage, a
// non-root user, the three binaries side by side (the host pinned to the
// built-ins' one), and a default command that
// reads the config where the Deployment mounts it.
func TestDockerfile(t *testing.T) {
	b, err := os.ReadFile("../Dockerfile")
	if err != nil {
		t.Fatal(err)
	}
	type instr struct{ op, args string }
	var stages [][]instr
	var cont string
	for _, line := range strings.Split(string(b), "\n") {
		line = strings.TrimSpace(line)
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		if strings.HasSuffix(line, "\\") {
			cont += strings.TrimSuffix(line, "\\") + " "
			continue
		}
		line, cont = cont+line, ""
		op, args, _ := strings.Cut(line, " ")
		op = strings.ToUpper(op)
		if op == "FROM" {
			stages = append(stages, nil)
		}
		if len(stages) == 0 {
			t.Fatalf("instruction before FROM: %s", line)
		}
		stages[len(stages)-1] = append(stages[len(stages)-1], instr{op, strings.TrimSpace(args)})
	}
	if len(stages) < 2 {
		t.Fatalf("want a build stage and a final stage, got %d stages", len(stages))
	}
	find := func(st []instr, op string) []string {
		var out []string
		for _, in := range st {
			if in.op == op {
				out = append(out, in.args)
			}
		}
		return out
	}
	build, final := stages[0], stages[len(stages)-1]
	// go mod download before COPY . . needs the go.mod of every module
	// the host's go.mod replaces with a folder of the repository (./sdk).
	gomod, err := os.ReadFile("../../go.mod")
	if err != nil {
		t.Fatal(err)
	}
	var copied []string
	for _, in := range build {
		if in.op == "RUN" && strings.Contains(in.args, "go mod download") {
			break
		}
		if in.op == "COPY" {
			copied = append(copied, strings.Fields(in.args)...)
		}
	}
	for _, line := range strings.Split(string(gomod), "\n") {
		// `replace OLD => ./DIR`, alone or in a replace block.
		f := strings.Fields(line)
		if len(f) < 3 || f[len(f)-2] != "=>" || !strings.HasPrefix(f[len(f)-1], "./") {
			continue
		}
		dir := strings.TrimPrefix(f[len(f)-1], "./")
		if want := dir + "/go.mod"; !slices.Contains(copied, want) {
			t.Errorf("go.mod replaces a module with ./%s, but the build stage does not COPY %s before go mod download", dir, want)
		}
	}
	if env := strings.Join(find(build, "ENV"), " "); !strings.Contains(env, "CGO_ENABLED=0") {
		t.Error("the build stage must set CGO_ENABLED=0 (static binaries)")
	}
	base := final[0].args
	if !strings.HasPrefix(base, "gcr.io/distroless/static") && base != "scratch" {
		t.Errorf("final stage FROM %s, want distroless static or scratch", base)
	}
	users := find(final, "USER")
	if len(users) == 0 {
		t.Fatal("the final stage sets no USER")
	}
	uid, _, _ := strings.Cut(users[len(users)-1], ":")
	if n, err := strconv.Atoi(uid); err != nil || n == 0 {
		t.Errorf("USER %s, want a numeric non-root uid (Kubernetes runAsNonRoot checks it)", users[len(users)-1])
	}
	copies := strings.Join(find(final, "COPY"), " ")
	for _, want := range []string{"/switchboard ", "/switchboard-sandbox ", "/switchboard-builtins "} {
		if !strings.Contains(copies, want) {
			t.Errorf("the final stage does not copy %s", strings.TrimSpace(want))
		}
	}
	// The host is built with the SHA-256 of the built-ins' binary it ships
	// beside (builtins.ServeBinaryPin), or it never runs that binary.
	runs := strings.Join(find(build, "RUN"), " ")
	if !strings.Contains(runs, "builtins.ServeBinaryPin=$(sha256sum /out/switchboard-builtins") {
		t.Error("the build stage does not pin switchboard-builtins' SHA-256 into the host (-X …/builtins.ServeBinaryPin=…)")
	}
	if !strings.Contains(runs, "loader.HelperPin=$(sha256sum /out/switchboard-sandbox") {
		t.Error("the build stage does not pin switchboard-sandbox's SHA-256 into the host (-X …/loader.HelperPin=…)")
	}
	if len(find(final, "ENTRYPOINT")) == 0 {
		t.Error("the final stage has no ENTRYPOINT")
	}
	m := loadManifests(t)
	cmd := strings.Join(find(final, "CMD"), " ")
	if cfg := flag(m.deployment.Spec.Template.Spec.Containers[0].Args, "--config"); !strings.Contains(cmd, `"`+cfg+`"`) {
		t.Errorf("CMD %s does not read the config at %s, where the Deployment mounts it", cmd, cfg)
	}
}

// The Nomad job parses as HCL and runs the same config, with the probes.
func TestNomadJob(t *testing.T) {
	src, err := os.ReadFile("../nomad/switchboard.nomad.hcl")
	if err != nil {
		t.Fatal(err)
	}
	f, diags := hclparse.NewParser().ParseHCL(src, "switchboard.nomad.hcl")
	if diags.HasErrors() {
		t.Fatal(diags)
	}
	block := func(body hcl.Body, typ string, labels ...string) []*hcl.Block {
		t.Helper()
		content, _, diags := body.PartialContent(&hcl.BodySchema{Blocks: []hcl.BlockHeaderSchema{{Type: typ, LabelNames: labels}}})
		if diags.HasErrors() {
			t.Fatal(diags)
		}
		return content.Blocks
	}
	one := func(body hcl.Body, typ string, labels ...string) *hcl.Block {
		t.Helper()
		bs := block(body, typ, labels...)
		if len(bs) != 1 {
			t.Fatalf("want one %s block, got %d", typ, len(bs))
		}
		return bs[0]
	}
	attr := func(body hcl.Body, name string) any {
		t.Helper()
		content, _, diags := body.PartialContent(&hcl.BodySchema{Attributes: []hcl.AttributeSchema{{Name: name}}})
		if diags.HasErrors() {
			t.Fatal(diags)
		}
		a, ok := content.Attributes[name]
		if !ok {
			return nil
		}
		v, diags := a.Expr.Value(nil)
		if diags.HasErrors() {
			t.Fatalf("%s: %v", name, diags)
		}
		switch {
		case v.Type().FriendlyName() == "string":
			return v.AsString()
		case v.Type().FriendlyName() == "number":
			n, _ := v.AsBigFloat().Int64()
			return n
		case v.Type().FriendlyName() == "bool":
			return v.True()
		default:
			var out []string
			for it := v.ElementIterator(); it.Next(); {
				_, e := it.Element()
				out = append(out, e.AsString())
			}
			return out
		}
	}
	job := one(f.Body, "job", "name")
	if attr(job.Body, "type") != "service" {
		t.Errorf("job type = %v, want service", attr(job.Body, "type"))
	}
	group := one(job.Body, "group", "name")
	if n, _ := attr(group.Body, "count").(int64); n < 2 {
		t.Errorf("group count = %v, want at least 2", attr(group.Body, "count"))
	}
	ports := block(one(group.Body, "network").Body, "port", "name")
	if len(ports) != 1 || ports[0].Labels[0] != "http" || attr(ports[0].Body, "to") != int64(8765) {
		t.Errorf("network: want port \"http\" { to = 8765 }")
	}
	paths := map[string]bool{}
	for _, c := range block(one(group.Body, "service").Body, "check") {
		if attr(c.Body, "type") == "http" {
			paths[attr(c.Body, "path").(string)] = true
		}
	}
	if !paths["/healthz"] || !paths["/readyz"] {
		t.Errorf("service checks on %v, want /healthz and /readyz", paths)
	}
	task := one(group.Body, "task", "name")
	if attr(task.Body, "driver") != "docker" {
		t.Errorf("task driver = %v, want docker", attr(task.Body, "driver"))
	}
	if u, _ := attr(task.Body, "user").(string); u == "" || strings.HasPrefix(u, "0") || u == "root" {
		t.Errorf("task user = %q, want a non-root uid", u)
	}
	cfg := one(task.Body, "config")
	if attr(cfg.Body, "readonly_rootfs") != true {
		t.Error("docker config: want readonly_rootfs = true")
	}
	args, _ := attr(cfg.Body, "args").([]string)
	if flag(args, "--http") != "0.0.0.0:8765" {
		t.Errorf("args %v: want --http 0.0.0.0:8765", args)
	}
	configPath := flag(args, "--config")
	m := loadManifests(t)
	var rendered bool
	for _, tpl := range block(task.Body, "template") {
		if "/"+attr(tpl.Body, "destination").(string) != configPath {
			continue
		}
		rendered = true
		if got, want := attr(tpl.Body, "data").(string), m.configMap.Data["config.hcl"]; got != want {
			t.Errorf("the Nomad job's config differs from the ConfigMap's:\n--- nomad\n%s\n--- configmap\n%s", got, want)
		}
	}
	if !rendered {
		t.Errorf("no template renders %s, the --config path", configPath)
	}
}
