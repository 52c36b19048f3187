//go:build linux

package sandboxinit

import (
	"fmt"
	"runtime"
	"unsafe"

	"golang.org/x/sys/unix"
)

// The kernel's keyrings are not namespaced: a key the host's user may read
// (a Kerberos ticket cache, a cached disk passphrase) is readable from a
// sandbox by its id, since the sandbox maps the host's user to itself, and
// a key planted in the user's keyring outlives the sandbox (red team).
// Landlock and the mounts do not cover them; a seccomp filter refuses the
// three system calls that reach them, as Docker's default profile does.

// The refused calls' numbers for 32-bit x86 programs on amd64 (int 0x80),
// which reach the kernel under their own architecture.
var denied386 = []uint32{286, 287, 288, 425, 426, 427} // add_key, request_key, keyctl, io_uring_setup, _enter, _register

const (
	auditArch386  = 0x40000003 // AUDIT_ARCH_I386
	x32SyscallBit = 0x40000000 // the x32 ABI's calls on amd64
	seccompNr     = 0          // offsetof(struct seccomp_data, nr)
	seccompArch   = 4          // offsetof(struct seccomp_data, arch)
)

// insn is one classic BPF instruction whose jumps name instructions by
// label ("" falls through).
type insn struct {
	code   uint16
	k      uint32
	jt, jf string
	label  string
}

// assemble resolves the labels into relative jumps.
func assemble(prog []insn) ([]unix.SockFilter, error) {
	at := map[string]int{}
	for i, in := range prog {
		if in.label != "" {
			at[in.label] = i
		}
	}
	rel := func(from int, label string) (uint8, error) {
		if label == "" {
			return 0, nil
		}
		to, ok := at[label]
		if !ok || to <= from || to-from-1 > 255 {
			return 0, fmt.Errorf("seccomp: bad jump to %q", label)
		}
		return uint8(to - from - 1), nil //nolint:gosec // G115: checked to be 0 to 255 above
	}
	out := make([]unix.SockFilter, len(prog))
	for i, in := range prog {
		jt, err := rel(i, in.jt)
		if err != nil {
			return nil, err
		}
		jf, err := rel(i, in.jf)
		if err != nil {
			return nil, err
		}
		out[i] = unix.SockFilter{Code: in.code, Jt: jt, Jf: jf, K: in.k}
	}
	return out, nil
}

// modeCall is a system call that takes a file mode, and which of its
// arguments holds it.
type modeCall struct {
	nr  uint32
	arg uint32
}

// The calls that set a file's mode, or make a file with one, by
// architecture (amd64 and arm64 native, and 32-bit x86 on amd64), and
// openat2's number (the same on all three), whose mode sits in a struct a
// filter cannot read.
var (
	modeCallsAMD64 = []modeCall{{90, 1}, {91, 1}, {268, 2}, {452, 2}, {85, 1}, {2, 2}, {257, 3}, {133, 1}, {259, 2}} // chmod, fchmod, fchmodat, fchmodat2, creat, open, openat, mknod, mknodat
	modeCallsARM64 = []modeCall{{52, 1}, {53, 2}, {452, 2}, {56, 3}, {33, 2}}                                        // fchmod, fchmodat, fchmodat2, openat, mknodat
	modeCalls386   = []modeCall{{15, 1}, {94, 1}, {306, 2}, {452, 2}, {8, 1}, {5, 2}, {295, 3}, {14, 1}, {297, 2}}   // as amd64's
)

const (
	sysOpenat2 = 437
	// setIDBits are S_ISUID and S_ISGID.
	setIDBits = 0o6000
	// seccompArgs is offsetof(struct seccomp_data, args): each argument is
	// 64 bits, its low half first on these little-endian machines.
	seccompArgs = 16
)

// keyringFilter is the seccomp program: EPERM for add_key, request_key
// and keyctl, native or 32-bit, for io_uring's three calls, and for the
// x32 ABI's calls on amd64 (which nothing here uses); EPERM too for a
// chmod, open or mknod whose mode sets the set-user-ID or set-group-ID bit
// (and ENOSYS for openat2, whose mode the filter cannot read: programs
// then fall back to openat). With the host's user mapped to itself, a
// sandbox of a host run as root made a copy of python setuid root in the
// project, and any user of the machine ran it as root (red team; as
// systemd's RestrictSUIDSGID does). Every other call is allowed.
func keyringFilter() ([]unix.SockFilter, error) {
	const (
		ld   = unix.BPF_LD | unix.BPF_W | unix.BPF_ABS
		jeq  = unix.BPF_JMP | unix.BPF_JEQ | unix.BPF_K
		jge  = unix.BPF_JMP | unix.BPF_JGE | unix.BPF_K
		jset = unix.BPF_JMP | unix.BPF_JSET | unix.BPF_K
		ret  = unix.BPF_RET | unix.BPF_K
	)
	allow, deny := uint32(unix.SECCOMP_RET_ALLOW), uint32(unix.SECCOMP_RET_ERRNO)|uint32(unix.EPERM)
	nosys := uint32(unix.SECCOMP_RET_ERRNO) | uint32(unix.ENOSYS)
	var arch uint32
	var native []modeCall
	switch runtime.GOARCH {
	case "amd64":
		arch, native = unix.AUDIT_ARCH_X86_64, modeCallsAMD64
	case "arm64":
		arch, native = unix.AUDIT_ARCH_AARCH64, modeCallsARM64
	default:
		return nil, fmt.Errorf("seccomp: no keyring filter for %s", runtime.GOARCH)
	}
	modeChecks := func(prog []insn, calls []modeCall) []insn {
		for _, c := range calls {
			prog = append(prog, insn{code: jeq, k: c.nr, jt: fmt.Sprintf("mode%d", c.arg)})
		}
		return append(prog, insn{code: jeq, k: sysOpenat2, jt: "nosys"})
	}
	prog := []insn{
		{code: ld, k: seccompArch},
		{code: jeq, k: arch, jf: "other"},
		{code: ld, k: seccompNr},
	}
	if runtime.GOARCH == "amd64" {
		prog = append(prog, insn{code: jge, k: x32SyscallBit, jt: "deny"})
	}
	denied := []uint32{
		unix.SYS_ADD_KEY, unix.SYS_REQUEST_KEY, unix.SYS_KEYCTL,
		unix.SYS_IO_URING_SETUP, unix.SYS_IO_URING_ENTER, unix.SYS_IO_URING_REGISTER,
	}
	for _, nr := range denied {
		prog = append(prog, insn{code: jeq, k: nr, jt: "deny"})
	}
	prog = modeChecks(prog, native)
	prog = append(prog, insn{code: ret, k: allow})
	if runtime.GOARCH == "amd64" {
		prog = append(prog,
			insn{code: jeq, k: auditArch386, jf: "allow", label: "other"},
			insn{code: ld, k: seccompNr})
		for _, nr := range denied386 {
			prog = append(prog, insn{code: jeq, k: nr, jt: "deny"})
		}
		prog = modeChecks(prog, modeCalls386)
		prog = append(prog, insn{code: ret, k: allow, label: "allow"})
	} else {
		prog = append(prog, insn{code: ret, k: allow, label: "other"})
	}
	for arg := uint32(1); arg <= 3; arg++ {
		prog = append(prog,
			insn{code: ld, k: seccompArgs + 8*arg, label: fmt.Sprintf("mode%d", arg)},
			insn{code: jset, k: setIDBits, jt: "deny"},
			insn{code: ret, k: allow})
	}
	prog = append(prog,
		insn{code: ret, k: nosys, label: "nosys"},
		insn{code: ret, k: deny, label: "deny"})
	return assemble(prog)
}

func denyKeyrings() error {
	prog, err := keyringFilter()
	if err != nil {
		return err
	}
	fprog := unix.SockFprog{Len: uint16(len(prog)), Filter: &prog[0]}                                                        //nolint:gosec // G115: a few instructions
	if err := unix.Prctl(unix.PR_SET_SECCOMP, unix.SECCOMP_MODE_FILTER, uintptr(unsafe.Pointer(&fprog)), 0, 0); err != nil { //nolint:gosec // G103: the kernel reads the program it points at
		return fmt.Errorf("seccomp: %w", err)
	}
	runtime.KeepAlive(prog)
	return nil
}
