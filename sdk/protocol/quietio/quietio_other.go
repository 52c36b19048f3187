//go:build !linux

package quietio

import (
	"io"
	"net"
	"os"
)

const supported = false

// Conn returns c: quiet reads and writes are Linux-only.
func Conn(c net.Conn) net.Conn { return c }

// Stream returns f: quiet reads and writes are Linux-only.
func Stream(f *os.File) io.ReadWriter { return f }

// FileWriter returns f: quiet writes are Linux-only.
func FileWriter(f *os.File) io.Writer { return f }

// GaveUp reports false: FileWriter writes the ordinary way from the start.
func GaveUp(io.Writer) bool { return false }
