package bash

import (
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
)

// opq marks an expected opaque pattern; its reason is not compared.
const opq = "<opaque>"

func TestCommands(t *testing.T) {
	tests := []struct {
		line string
		want []string
	}{
		{"ls", []string{"ls"}},
		{"ls -la /tmp", []string{"ls"}},
		{"ls && rm -rf ~", []string{"ls", "rm"}},
		{"ls; rm x", []string{"ls", "rm"}},
		{"ls || rm x", []string{"ls", "rm"}},
		{"cat f | grep x | wc -l", []string{"cat", "grep", "wc"}},
		{"echo $(rm x)", []string{"echo", "rm"}},
		{"echo `rm x`", []string{"echo", "rm"}},
		{"echo \"$(rm x)\"", []string{"echo", "rm"}},
		{"diff <(ls a) <(rm b)", []string{"diff", "ls", "rm"}},
		{"(cd x && rm y)", []string{"cd", "rm"}},
		{"{ ls; rm y; }", []string{"ls", "rm"}},
		{"VAR=1 rm x", []string{"rm"}},
		{"A=1 B=2 /usr/bin/sudo ls", []string{"ls", "sudo"}},
		{"/bin/rm x", []string{"rm"}},
		{`\rm x`, []string{"rm"}},
		{`"rm" x`, []string{"rm"}},
		{`'r''m' x`, []string{"rm"}},
		{"bash -c 'rm x'", []string{"bash", "rm"}},
		{"sh -c \"ls && rm x\"", []string{"ls", "rm", "sh"}},
		{"bash -lc 'curl x'", []string{"bash", "curl"}},
		{"bash -c \"$CMD\"", []string{"bash", opq}},
		{"bash script.sh", []string{"bash", opq}},
		{"cat x | bash", []string{"bash", "cat", opq}},
		{"eval 'rm x'", []string{"eval", "rm"}},
		{"eval $X", []string{"eval", opq}},
		{"xargs rm", []string{"rm", "xargs"}},
		{"find . -name x | xargs -n 1 -I{} rm {}", []string{"find", "rm", "xargs"}},
		{"xargs", []string{"echo", "xargs"}},
		{"find . -exec rm {} \\;", []string{"find", "rm"}},
		{"find . -name '*.go' -execdir gofmt -l {} +", []string{"find", "gofmt"}},
		{"env FOO=1 rm x", []string{"env", "rm"}},
		{"env -u HOME rm x", []string{"env", "rm"}},
		{"nohup rm x &", []string{"nohup", "rm"}},
		{"timeout 5 rm x", []string{"rm", "timeout"}},
		{"timeout -s KILL 5s rm x", []string{"rm", "timeout"}},
		{"sudo -u root rm x", []string{"rm", "sudo"}},
		{"sudo rm -rf /", []string{"rm", "sudo"}},
		{"nice -n 10 make", []string{"make", "nice"}},
		{"exec rm x", []string{"exec", "rm"}},
		{"command rm x", []string{"command", "rm"}},
		{"time make test", []string{"make"}}, // time is a keyword, not a command
		{"git status", []string{"git"}},
		{"git -c alias.x='!rm -rf ~' x", []string{"git", opq}},
		{"git -c core.sshCommand=evil fetch", []string{"git", opq}},
		{"git -c user.name=me commit", []string{"git"}},
		{"cat <<EOF | sh\nrm x\nEOF", []string{"cat", opq, "sh"}},
		{"cat <<EOF\n$(rm x)\nEOF", []string{"cat", "rm"}},
		{"f() { rm x; }; f", []string{"f", "rm"}},
		{"if true; then rm x; fi", []string{"rm", "true"}},
		{"for i in 1 2; do rm $i; done", []string{"rm"}},
		{"while read l; do echo $l; done < f", []string{"echo", "read"}},
		{"$CMD x", []string{opq}},
		{"$(echo rm) x", []string{"echo", opq}},
		{"ls &&", []string{opq}},
		{"echo 'unterminated", []string{opq}},
		{"X=1", nil},
		{"", nil},
		{"ls > out.txt 2>&1", []string{"ls"}},
		{"bash -c 'bash -c \"rm x\"'", []string{"bash", "rm"}},
	}
	for _, tt := range tests {
		got := Commands(tt.line)
		for i, g := range got {
			if strings.HasPrefix(g, "\x00") {
				got[i] = opq
			}
		}
		slices.Sort(got)
		want := slices.Clone(tt.want)
		slices.Sort(want)
		if diff := cmp.Diff(want, got, cmpopts.EquateEmpty()); diff != "" {
			t.Errorf("Commands(%q) = %q, want %q", tt.line, got, want)
		}
	}
}

func FuzzCommands(f *testing.F) {
	for _, s := range []string{"ls && rm x", "bash -c 'eval \"$x\"'", "find . -exec sh -c 'rm' \\;", "a=$(b) c"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, line string) {
		for _, p := range Commands(line) {
			if p == "" {
				t.Fatalf("Commands(%q) returned an empty pattern", line)
			}
		}
	})
}
