// Package launchertest tests package launcher (sdk/protocol/launcher, in
// the SDK's module) against the host's test plugins (internal/fixtures):
// the fixtures live in the host's module, and the SDK's module must not
// depend on it, so these tests live here. It has no code of its own.
package launchertest
