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

// keyringFilter is the seccomp program: EPERM for add_key, request_key
// and keyctl, native or 32-bit, for io_uring's three calls, and for the
// x32 ABI's calls on amd64 (which nothing here uses); every other call
// allowed.
func keyringFilter() ([]unix.SockFilter, error) {
	const (
		ld  = unix.BPF_LD | unix.BPF_W | unix.BPF_ABS
		jeq = unix.BPF_JMP | unix.BPF_JEQ | unix.BPF_K
		jge = unix.BPF_JMP | unix.BPF_JGE | unix.BPF_K
		ret = unix.BPF_RET | unix.BPF_K
	)
	allow, deny := uint32(unix.SECCOMP_RET_ALLOW), uint32(unix.SECCOMP_RET_ERRNO)|uint32(unix.EPERM)
	var arch uint32
	switch runtime.GOARCH {
	case "amd64":
		arch = unix.AUDIT_ARCH_X86_64
	case "arm64":
		arch = unix.AUDIT_ARCH_AARCH64
	default:
		return nil, fmt.Errorf("seccomp: no keyring filter for %s", runtime.GOARCH)
	}
	prog := []insn{
		{code: ld, k: seccompArch},
		{code: jeq, k: arch, jf: "other"},
		{code: ld, k: seccompNr},
	}
	if runtime.GOARCH == "amd64" {
		prog = append(prog, insn{code: jge, k: x32SyscallBit, jt: "deny"})
	}
	// io_uring: a way around this filter's checks (its operations are not
	// system calls) and a frequent route of kernel exploits; Docker's
	// default profile refuses it too (red team).
	denied := []uint32{
		unix.SYS_ADD_KEY, unix.SYS_REQUEST_KEY, unix.SYS_KEYCTL,
		unix.SYS_IO_URING_SETUP, unix.SYS_IO_URING_ENTER, unix.SYS_IO_URING_REGISTER,
	}
	for _, nr := range denied {
		prog = append(prog, insn{code: jeq, k: nr, jt: "deny"})
	}
	prog = append(prog, insn{code: ret, k: allow}, insn{code: ret, k: allow, label: "other"})
	if runtime.GOARCH == "amd64" {
		// "other" checked for i386 before allowing: replace its allow.
		prog = prog[:len(prog)-1]
		prog = append(prog,
			insn{code: jeq, k: auditArch386, jf: "allow", label: "other"},
			insn{code: ld, k: seccompNr})
		for _, nr := range denied386 {
			prog = append(prog, insn{code: jeq, k: nr, jt: "deny"})
		}
		prog = append(prog, insn{code: ret, k: allow, label: "allow"})
	}
	prog = append(prog, insn{code: ret, k: deny, label: "deny"})
	return assemble(prog)
}

// denyKeyrings installs the filter on this thread (the plugin is forked
// from it and inherits it). no_new_privs must be set.
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
