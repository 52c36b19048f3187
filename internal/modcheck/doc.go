// Package modcheck holds the test that keeps the repository's Go modules
// apart: the SDK's module (sdk/go.mod) must not depend on the host's module
// or on its host-only dependencies, nor ask for a newer Go than plugin
// authors need; examples/hello is a module that depends on the SDK alone.
// It has no code of its own.
package modcheck
