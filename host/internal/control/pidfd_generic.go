//go:build linux && (amd64 || arm64 || riscv64 || loong64 || 386 || arm || s390x || ppc64 || ppc64le)

package control

// soPeerPIDFD is SO_PEERPIDFD from asm-generic/socket.h (Linux 6.5).
const soPeerPIDFD = 77
