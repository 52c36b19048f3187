// Package gitplaceholder names the .git placeholder a host puts in a
// writable folder that is no repository while its servers run, so that
// the host that makes it, the host that removes it and the git built-in
// that must not take it for a repository agree on what it is.
//
// The placeholder is a .git file git cannot read as a gitfile: git stops
// there with "invalid gitfile format" instead of taking the folder for a
// repository. An empty .git folder did not do that: git then checks
// whether the folder itself is a git directory, so a server that wrote
// HEAD, objects/, refs/ and a config naming core.worktree and
// core.fsmonitor beside it had the person's next `git status` in the
// folder run that program (found after red team round 9's fix). Where the
// folder lies inside another work tree (a package of a monorepo), git
// must go on up to that repository, and the placeholder is the empty
// folder instead.
package gitplaceholder

import (
	"bytes"

	"github.com/switchboard-mcp/switchboard/internal/regularfile"
)

// Content is the placeholder file's text: what a person who opens it reads.
const Content = "switchboard: no repository here while a Switchboard host's servers run.\n" +
	"A server that may write this folder could otherwise make one, and your git would run\n" +
	"what its config names. The host removes this file when it stops.\n" +
	"To make a repository here, stop the host first, then: rm .git && git init\n" +
	"(while its servers run, one could write the new repository before they restart to see it read-only).\n" +
	"If this file is still here after the host stopped, this folder holds a HEAD file that could make\n" +
	"git take the folder itself for a repository (with HEAD, objects/, refs/ and a config a server\n" +
	"wrote): look at them before you remove this file.\n"

// IsFile reports whether path is the placeholder file: a regular file
// holding exactly Content.
func IsFile(path string) bool {
	b, err := regularfile.Read(path, int64(len(Content)))
	return err == nil && bytes.Equal(b, []byte(Content))
}
