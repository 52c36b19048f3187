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
		{"A=1 B=2 /usr/bin/sudo ls", []string{"/usr/bin/sudo", "ls", "sudo"}},
		{"/bin/rm x", []string{"/bin/rm", "rm"}},
		{"./tools/ls", []string{opq, "ls"}},
		{"/usr/bin/../../tmp/ls", []string{opq, "ls"}},
		{`\rm x`, []string{"rm"}},
		{`"rm" x`, []string{"rm"}},
		{`'r''m' x`, []string{"rm"}},
		{"bash -c 'rm x'", []string{"bash", "rm"}},
		{"sh -c \"ls && rm x\"", []string{"ls", "rm", "sh"}},
		{"bash -lc 'curl x'", []string{"bash", "curl"}},
		{"bash -c \"$CMD\"", []string{"bash", opq}},
		{"bash script.sh", []string{"bash", opq}},
		{"cat x | bash", []string{"bash", "cat", opq}},
		{"eval 'rm x'", []string{"eval", opq, "rm"}},
		{"eval $X", []string{"eval", opq}},
		{"xargs rm", []string{opq, "rm", "xargs"}},
		{"find . -name x | xargs -n 1 -I{} rm {}", []string{"find", opq, "rm", "xargs"}},
		{"xargs", []string{"echo", opq, "xargs"}},
		{"find . -exec rm {} \\;", []string{"find", opq, "rm"}},
		{"find . -name '*.go' -print", []string{"find"}},
		{"find . -name '*.go' -execdir gofmt -l {} +", []string{"find", "gofmt", opq}},
		{"env FOO=1 rm x", []string{"env", "rm"}},
		{"env -u HOME rm x", []string{"env", opq, "rm"}},
		{"nohup rm x &", []string{"nohup", "rm"}},
		{"timeout 5 rm x", []string{"rm", "timeout"}},
		{"timeout -s KILL 5s rm x", []string{"rm", "timeout"}},
		{"sudo -u root rm x", []string{"rm", "sudo"}},
		{"sudo rm -rf /", []string{"rm", "sudo"}},
		{"nice -n 10 make", []string{"make", "nice"}},
		{"exec rm x", []string{"exec", opq, "rm"}},
		{"command rm x", []string{"command", opq, "rm"}},
		{"time make test", []string{"make"}}, // time is a keyword, not a command
		{"time -- rm v", []string{"rm"}},     // round 16: -- ran rm unasked
		{"time -p -- rm v", []string{"rm"}},
		{"git status", []string{"git", opq}},
		{"git -c alias.x='!rm -rf ~' x", []string{"git", opq}},
		{"git -c core.sshCommand=evil fetch", []string{"git", opq}},
		{"git -c user.name=me commit", []string{"git", opq}},
		{"git log --oneline -5 && git diff HEAD~1", []string{"git", opq}},
		{"git add -- *.go", []string{"git", opq}},
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
	for _, s := range []string{
		"ls && rm x", "bash -c 'eval \"$x\"'", "find . -exec sh -c 'rm' \\;", "a=$(b) c",
		"sed -n -e '/a/,/b/{s/x/y/2;p}' -e 'y/ab/cd/' f", `sed 's\x\y\e'`, "awk -F: '{print $1}'",
		"sudo -Eu root timeout -k5 5 nice -n1 rm x", "git -C . rebase -ix cmd", "echo ${a[x]} $((y)) ${!z} ${w@P} > ~/f",
		"declare -n r=PATH; read -a 'a[1]'; printf -vx y; tar -xIcmd f",
	} {
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

// TestCommandsOpaque lists lines that can run something an allow list
// does not name: each must yield an opaque pattern, so that no allow rule
// can auto-allow it. also names patterns that must be reported besides (so
// that a deny rule for them still matches).
func TestCommandsOpaque(t *testing.T) {
	tests := []struct {
		name, line string
		also       []string
	}{
		// From the issue.
		{"arithmetic on a variable", `x='a[$(cmd)]'; echo $((x))`, []string{"echo"}},
		{"prompt expansion", `x='$(cmd)'; echo ${x@P}`, []string{"echo"}},
		{"git config alias", `git config alias.x '!cmd'; git x`, []string{"git"}},
		{"git config fsmonitor", `git config core.fsmonitor cmd`, []string{"git"}},
		{"GIT_EXTERNAL_DIFF", `GIT_EXTERNAL_DIFF=./cmd git diff`, []string{"git"}},
		{"GIT_EDITOR", `GIT_EDITOR='cmd' git commit`, []string{"git"}},
		{"env -S", `env -S 'cmd arg'`, []string{"env"}},
		{"variable command", `c=rm; $c x`, nil},
		{"relative ls", `./tools/ls`, []string{"ls"}},
		{"PATH prefix", `PATH=./tools:$PATH ls`, []string{"ls"}},
		{"export PATH", `export PATH=./tools:$PATH; ls`, []string{"ls"}},
		{"PATH assignment", `PATH=./tools; ls`, []string{"ls"}},

		// Expansions that execute.
		{"arithmetic command", `(( x ))`, nil},
		{"let", `let x+1`, nil},
		{"arithmetic with $var", `echo $(( $x + 1 ))`, nil},
		{"old arithmetic", `echo $[x]`, nil},
		{"for arithmetic", `for ((i=0; i<n; i++)); do echo; done`, nil},
		{"subscript", `echo ${a[x]}`, nil},
		{"slice", `echo ${a:x:1}`, nil},
		{"indirect", `echo ${!x}`, nil},
		{"[[ -eq ]]", `[[ $x -eq 1 ]]`, nil},
		{"[[ -v subscript ]]", `[[ -v 'a[$(cmd)]' ]]`, nil},
		{"test -v subscript", `test -v 'a[$(cmd)]'`, nil},
		{"assign subscript", `a[x]=1`, nil},
		{"array literal subscript", `a=([x]=1)`, nil},
		{"declare -i", `declare -i x=$y`, nil},
		{"local -n", `f() { local -n r=PATH; r=./t; }`, nil},
		{"printf -v subscript", `printf -v 'a[$(cmd)]' x`, []string{"printf"}},
		{"printf -v PATH", `printf -v PATH ./t`, []string{"printf"}},
		{"printf computed first", `printf $x ./t`, []string{"printf"}},
		{"read PATH", `read PATH <<< ./t; ls`, []string{"ls", "read"}},
		{"read -a subscript", `read -a 'a[$(cmd)]'`, []string{"read"}},
		{"mapfile -C", `mapfile -C cmd -c 1 a < f`, []string{"mapfile"}},
		{"unset subscript", `unset 'a[$(cmd)]'`, []string{"unset"}},
		{"for PATH", `for PATH in ./t; do ls; done`, []string{"ls"}},
		{"declare string", `declare "PATH=./t"`, nil},
		{"declare computed", `declare "$x"`, nil},

		// Command position.
		{"command substitution name", `$(echo rm) x`, []string{"echo"}},
		{"glob name", `/bin/r? x`, nil},
		{"brace name", `{rm,x}`, nil},
		{"ansi-c name", `$'\x72m' x`, nil},
		{"tilde name", `~/bin/ls`, nil},
		{"dot slash", `./rm x`, []string{"rm"}},
		{"unclean absolute", `/usr/bin/./ls`, []string{"ls"}},

		// Builtins that run strings or change lookup.
		{"eval", `eval "$x"`, []string{"eval"}},
		{"source", `source ./x.sh`, []string{"source"}},
		{"dot", `. ./x.sh`, []string{"."}},
		{"exec", `exec ls`, []string{"exec", "ls"}},
		{"command", `command ls`, []string{"command", "ls"}},
		{"builtin", `builtin echo`, []string{"builtin", "echo"}},
		{"trap", `trap 'cmd' EXIT`, []string{"trap"}},
		{"alias", `shopt -s expand_aliases; alias ls='rm -rf x'`, []string{"alias"}},
		{"enable -f", `enable -f ./evil.so ls`, []string{"enable"}},
		{"hash -p", `hash -p ./evil ls; ls`, []string{"hash", "ls"}},
		{"BASH_ENV", `BASH_ENV=./evil bash -c ls`, []string{"bash", "ls"}},
		{"exported function", `env 'BASH_FUNC_ls%%=() { rm x; }' bash -c ls`, []string{"env"}},
		{"LD_PRELOAD", `LD_PRELOAD=./evil.so ls`, []string{"ls"}},
		{"PAGER", `PAGER=cmd git log`, []string{"git"}},
		{"HOME for git", `HOME=./evil git status`, []string{"git"}},

		// Programs that run what their arguments name.
		{"env with options", `env -i ls`, []string{"env", "ls"}},
		{"xargs", `echo x | xargs git`, []string{"echo", "git", "xargs"}},
		{"find -exec", `find . -exec sh -c 'cmd' \;`, []string{"find", "sh", "cmd"}},
		{"find -ok", `find . -ok rm {} \;`, []string{"find", "rm"}},
		{"find -fprint", `find . -fprint /tmp/x`, []string{"find"}},
		{"find computed", `find . $x`, []string{"find"}},
		{"awk system", `awk 'BEGIN{system("cmd")}'`, []string{"awk"}},
		{"awk pipe", `awk '{print | "sh"}'`, []string{"awk"}},
		{"awk -f", `awk -f prog.awk`, []string{"awk"}},
		{"sed e command", `sed '1e cmd' f`, []string{"sed"}},
		{"sed s///e", `sed -i 's/x/cmd/e' f`, []string{"sed"}},
		{"sed w", `sed -n 'w out' f`, []string{"sed"}},
		{"sed -f", `sed -f script.sed f`, []string{"sed"}},
		{"sed -e e", `sed -ne 's/a/b/;e' f`, []string{"sed"}},
		{"tar --to-command", `tar xf a.tar --to-command=cmd`, []string{"tar"}},
		{"tar checkpoint", `tar cf a.tar --checkpoint=1 --checkpoint-action=exec=cmd .`, []string{"tar"}},
		{"tar -I", `tar -xIcmd -f a.tar`, []string{"tar"}},
		{"zip -TT", `zip a.zip f -T -TT cmd`, []string{"zip"}},
		{"rsync -e", `rsync -avze cmd a b:`, []string{"rsync"}},
		{"ssh ProxyCommand", `ssh -o ProxyCommand=cmd host`, []string{"ssh"}},
		{"less +!", `less '+!cmd' f`, []string{"less"}},
		{"man -P", `man -P cmd ls`, []string{"man"}},
		{"vim", `vim -c '!cmd'`, []string{"vim"}},
		{"split --filter", `split --filter=cmd f`, []string{"split"}},
		{"sort --compress-program", `sort -S 1K --compress-program=sh -T . f`, []string{"sort"}},
		{"sort, option abbreviated", `sort --compress=sh f`, []string{"sort"}},
		{"tar, option abbreviated", `tar xf a.tar --to-com=cmd`, []string{"tar"}},
		{"git after writing its config", `cp cfg .git/config; git status`, []string{"cp", "git"}},

		// git.
		{"git alias-like", `git x`, []string{"git"}},
		{"git -c", `git -c core.pager=cmd log`, []string{"git"}},
		{"git -C", `git -C ../other status`, []string{"git"}},
		{"git --exec-path", `git --exec-path=./t status`, []string{"git"}},
		{"git --git-dir", `git --git-dir=./evil status`, []string{"git"}},
		{"git submodule foreach", `git submodule foreach cmd`, []string{"git"}},
		{"git filter-branch", `git filter-branch --tree-filter cmd`, []string{"git"}},
		{"git bisect run", `git bisect run cmd`, []string{"git"}},
		{"git rebase --exec", `git rebase --exec cmd main`, []string{"git"}},
		{"git rebase -x", `git rebase -x cmd main`, []string{"git"}},
		{"git rebase -ix", `git rebase -ix cmd main`, []string{"git"}},
		{"git difftool", `git difftool -x cmd`, []string{"git"}},
		{"git mergetool", `git mergetool`, []string{"git"}},
		{"git daemon", `git daemon`, []string{"git"}},
		{"git instaweb", `git instaweb`, []string{"git"}},
		{"git credential", `git credential fill`, []string{"git"}},
		{"git hook", `git hook run pre-commit`, []string{"git"}},
		{"git fetch --upload-pack", `git fetch --upload-pack=cmd origin`, []string{"git"}},
		{"git clone -u", `git clone -u cmd x`, []string{"git"}},
		{"git clone --template", `git clone --template=./t x`, []string{"git"}},
		{"git push --receive-pack", `git push --receive-pack=cmd`, []string{"git"}},
		{"git grep -O", `git grep -Ocmd x`, []string{"git"}},
		{"git log --output", `git log --output=f`, []string{"git"}},
		{"git diff --ext-diff", `git diff --ext-diff`, []string{"git"}},
		{"git merge -s", `git merge -s ../evil x`, []string{"git"}},
		{"git computed argument", `git log $x`, []string{"git"}},
		{"git glob before --", `git add *.go`, []string{"git"}},

		// Wrappers keep the wrapped command; unknown options are opaque.
		{"sudo unknown option", `sudo --wat rm x`, []string{"sudo"}},
		{"sudo shell", `sudo -s`, []string{"sudo"}},
		{"timeout computed", `timeout $t rm x`, []string{"timeout"}},
		{"su", `su -c 'rm x'`, []string{"su"}},
		{"bash stdin", `bash -s < x`, []string{"bash"}},
		{"bash rcfile", `bash --rcfile ./x -i`, []string{"bash"}},
		// The dynamic loader runs the program it is given (red team
		// round 14: it ran rm under a deny rule for rm).
		{"glibc loader", `/lib64/ld-linux-x86-64.so.2 /bin/rm x`, []string{"ld-linux-x86-64.so.2"}},
		{"ld.so", `/lib/ld.so rm x`, []string{"ld.so"}},
		{"setarch", `setarch x86_64 rm x`, []string{"setarch"}},
		{"diff3 --diff-program", `diff3 --diff-program=rm a b c`, []string{"diff3"}},
		{"sdiff --diff-program", `sdiff --diff-program=rm a b`, []string{"sdiff"}},
		{"linux64", `linux64 rm x`, []string{"linux64"}},
		{"capsh", `capsh -- -c 'rm x'`, []string{"capsh"}},
		{"run-parts", `run-parts --arg=x rp`, []string{"run-parts"}},
		{"start-stop-daemon", `start-stop-daemon -S -x /bin/rm -- x`, []string{"start-stop-daemon"}},
		{"logsave", `logsave /dev/null rm x`, []string{"logsave"}},
		{"groff", `printf '.sy rm x\n' | groff -U -Tascii`, []string{"groff"}},
		{"ip netns exec", `ip netns exec n rm x`, []string{"ip"}},
		{"musl loader", `/lib/ld-musl-x86_64.so.1 /bin/rm x`, []string{"ld-musl-x86_64.so.1"}},

		// Redirections this check cannot judge.
		{"computed target", `echo x > $f`, []string{"echo"}},
		{"home target", `echo x > ~/.bashrc`, []string{"echo"}},
		{"git config target", `echo '[core] fsmonitor = cmd' >> .git/config; git status`, []string{"echo", "git"}},
		{"git hook target", `echo cmd > .git/hooks/pre-commit`, []string{"echo"}},
		{"proc target", `echo x > /proc/self/cwd/f`, []string{"echo"}},
		{"glob target", `echo x > *.json`, []string{"echo"}},
		{"relative after cd", `cd /x && echo x > f`, []string{"cd", "echo"}},
		{"dup to a file", `echo x >& $f`, []string{"echo"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := Commands(tt.line)
			if !slices.ContainsFunc(got, func(p string) bool { return strings.HasPrefix(p, "\x00") }) {
				t.Errorf("Commands(%q) = %q, want an opaque pattern", tt.line, got)
			}
			for _, w := range tt.also {
				if !slices.Contains(got, w) {
					t.Errorf("Commands(%q) = %q, want %q among them", tt.line, got, w)
				}
			}
		})
	}
}

// TestCommandsPlain lists everyday lines that must keep their plain
// patterns (no opaque one), so that allow lists stay useful.
func TestCommandsPlain(t *testing.T) {
	tests := []struct {
		line string
		want []string
	}{
		{"echo hi", []string{"echo"}},
		{"echo $((1 + 2))", []string{"echo"}},
		{"echo ${#a[@]} ${a[0]} ${!a[@]} ${x:-d} ${x@Q}", []string{"echo"}},
		{"x=1; echo $x > out.txt", []string{"echo"}},
		{"ls -la | grep go | wc -l > /dev/null 2>&1", []string{"grep", "ls", "wc"}},
		{"sed -n '1,20p' f", []string{"sed"}},
		{"sed -i 's/foo/bar/g; /x/d' f", []string{"sed"}},
		{"sed -E -e 's|a|b|' -e '/^$/d' f", []string{"sed"}},
		{"awk '{print $1}' f", []string{"awk"}},
		{"awk -F: -v x=1 '{ n += $2 } END { print n }' f", []string{"awk"}},
		{"tar xzf a.tgz -C out", []string{"tar"}},
		{"rsync -av a/ b/", []string{"rsync"}},
		{"timeout 5s go test ./...", []string{"go", "timeout"}},
		{"sudo -u root -E make", []string{"make", "sudo"}},
		{"nice -n 10 stdbuf -oL make", []string{"make", "nice", "stdbuf"}},
		{"python3 -c 'print(1)'", []string{"python3"}},
		{"node script.js", []string{"node"}},
		{"f() { ls; }; f", []string{"f", "ls"}},
		{"while read -r line; do echo \"$line\"; done < f", []string{"echo", "read"}},
		{"read -r a b <<< 'x y'", []string{"read"}},
		{"while IFS= read -r l; do echo \"$l\"; done < f", []string{"echo", "read"}},
		{"export -n FOO", nil},
		{"printf '%s\\n' \"$x\"", []string{"printf"}},
		{"[ -f x ] && test -d y", []string{"[", "test"}},
		{"[[ $x == y ]] && echo", []string{"echo"}},
		{"export FOO=1; FOO=2 make", []string{"make"}},
		{"find . -name '*.go' -type f", []string{"find"}},
		{"cat <<'EOF' > notes.txt\nhello\nEOF", []string{"cat"}},
		{"mkdir -p build && cd build && ls", []string{"cd", "ls", "mkdir"}},
		{"watch -n 1 'ls; rm x'", []string{"ls", "rm", "watch"}},
	}
	for _, tt := range tests {
		t.Run(tt.line, func(t *testing.T) {
			if diff := cmp.Diff(tt.want, Commands(tt.line)); diff != "" {
				t.Errorf("Commands(%q) mismatch (-want +got):\n%s", tt.line, diff)
			}
		})
	}
}
