//go:build linux && !(amd64 || arm64 || riscv64 || loong64 || 386 || arm || s390x || ppc64 || ppc64le)

package control

// soPeerPIDFD is not used on architectures whose socket options differ.
const soPeerPIDFD = 0
