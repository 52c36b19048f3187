package git

import "testing"

// TestNeutral: every program-valued family is recognised whatever the case
// of its section and name, driver names are kept as written, and the
// opt-ins leave exactly their own families alone.
func TestNeutral(t *testing.T) {
	cases := []struct {
		key          string
		hooks, filts bool
		want         string
		ok           bool
	}{
		{key: "core.fsmonitor", want: "false", ok: true},
		{key: "core.hookspath", want: "/dev/null", ok: true},
		{key: "core.hookspath", hooks: true, ok: false},
		{key: "core.pager", want: "cat", ok: true},
		{key: "pager.log", want: "false", ok: true},
		{key: "core.editor", want: ":", ok: true},
		{key: "sequence.editor", want: ":", ok: true},
		{key: "core.askpass", want: "", ok: true},
		{key: "core.sshcommand", want: "", ok: true},
		{key: "core.gitproxy", want: "none", ok: true},
		{key: "core.alternaterefscommand", want: "", ok: true},
		{key: "credential.helper", want: "", ok: true},
		{key: "credential.https://example.com.helper", want: "", ok: true},
		{key: "diff.external", want: "", ok: true},
		{key: "diff.evil.command", want: "", ok: true},
		{key: "diff.evil.textconv", want: "", ok: true},
		{key: "diff.evil.textconv", filts: true, ok: false},
		{key: "diff.evil.command", filts: true, want: "", ok: true},
		{key: "merge.evil.driver", want: "", ok: true},
		{key: "filter.evil.clean", want: "", ok: true},
		{key: "Filter.a=b.Clean", want: "", ok: true},
		{key: "filter.evil.smudge", want: "", ok: true},
		{key: "filter.evil.process", want: "", ok: true},
		{key: "filter.evil.required", want: "false", ok: true},
		{key: "filter.evil.clean", filts: true, ok: false},
		{key: "gpg.program", want: "", ok: true},
		{key: "gpg.ssh.program", want: "", ok: true},
		{key: "GPG.X509.Program", want: "", ok: true},
		{key: "gpg.ssh.defaultkeycommand", want: "", ok: true},
		{key: "log.showsignature", want: "false", ok: true},
		{key: "commit.gpgsign", want: "false", ok: true},
		{key: "protocol.file.allow", want: "never", ok: true},
		{key: "protocol.allow", want: "never", ok: true},
		{key: "uploadpack.packobjectshook", want: "", ok: true},
		{key: "difftool.x.cmd", want: "", ok: true},
		{key: "mergetool.x.path", want: "", ok: true},
		{key: "trailer.sign.command", want: "", ok: true},
		{key: "sendemail.smtpserver", want: "", ok: true},
		{key: "imap.tunnel", want: "", ok: true},
		{key: "submodule.sub.update", want: "none", ok: true},
		{key: "alias.st", want: "", ok: true},
		{key: "hook.lint.command", want: "", ok: true},
		{key: "include.path", ok: false},
		{key: "includeif.onbranch:x.path", ok: false},
		{key: "user.name", ok: false},
		{key: "core.worktree", ok: false},
		{key: "remote.origin.url", ok: false},
		{key: "submodule.sub.path", ok: false},
		{key: "color.pager", ok: false},
	}
	for _, c := range cases {
		g := &guard{allowHooks: c.hooks, allowFilters: c.filts}
		got, ok := g.neutral(c.key)
		if got != c.want || ok != c.ok {
			t.Errorf("neutral(%q) hooks=%v filters=%v = %q, %v; want %q, %v", c.key, c.hooks, c.filts, got, ok, c.want, c.ok)
		}
	}
}

func TestCanonicalKey(t *testing.T) {
	for in, want := range map[string]string{
		"Filter.A=B.Clean":         "filter.A=B.clean",
		"CORE.FsMonitor":           "core.fsmonitor",
		"includeIf.gitdir:/X.Path": "includeif.gitdir:/X.path",
		"a.b.c.d":                  "a.b.c.d",
	} {
		if got := canonicalKey(in); got != want {
			t.Errorf("canonicalKey(%q) = %q, want %q", in, got, want)
		}
	}
}

func FuzzParseConfigList(f *testing.F) {
	f.Add([]byte("file:/x/config\x00core.bare\nfalse\x00file:/x/config\x00core.fsmonitor\x00"))
	f.Add([]byte("command line:\x00a.b\n\x00"))
	f.Fuzz(func(t *testing.T, b []byte) {
		for _, e := range parseConfigList(b) {
			canonicalKey(e.key)
			(&guard{}).neutral(e.key)
		}
	})
}
