#!/usr/bin/env bash
# Runs the official MCP conformance suite's server scenarios against the
# conformance plugin served through `switchboard serve --http`, and fails on
# any failed scenario. `make conformance` calls it from the repository root.
#
# Environment:
#   TOOLS      where Node 22 and the suite are installed (default bin/tools)
#   SCENARIO   run only this scenario (default: the suite's active scenarios)
#   SUITE      the suite to run when SCENARIO is unset: active (default), all, pending
#   KEEP       set to keep the work directory (config, host log, results)
set -euo pipefail
cd "$(dirname "$0")/../.."
ROOT=$PWD

# Pinned versions: the suite, and the Node it needs (0.1.16 crashes on
# Node 20: fs.globSync). Node comes from npm as the package node@22.
CONFORMANCE_VERSION=0.1.16
NODE_VERSION=22.23.3

TOOLS=${TOOLS:-$ROOT/bin/tools}
BIN=$ROOT/bin
mkdir -p "$TOOLS"

log() { printf 'conformance: %s\n' "$*" >&2; }

# Node: the machine's if it is 22 or newer, else node@22 from npm.
node_major() { "$1" --version 2>/dev/null | sed -E 's/^v([0-9]+).*/\1/'; }
NODE=$(command -v node || true)
if [[ -z $NODE || $(node_major "$NODE") -lt 22 ]]; then
  NODE=$TOOLS/node/node_modules/node/bin/node
  if [[ $(node_major "$NODE" || true) != 22 ]]; then
    log "installing node@$NODE_VERSION into $TOOLS/node (the machine has ${NODE:+$(node --version 2>/dev/null || echo none)})"
    npm install --silent --no-audit --no-fund --prefix "$TOOLS/node" "node@$NODE_VERSION" >&2
  fi
fi
log "node $("$NODE" --version) at $NODE"

# The suite, pinned.
SUITE_DIR=$TOOLS/conformance
SUITE_JS=$SUITE_DIR/node_modules/@modelcontextprotocol/conformance/dist/index.js
installed=$("$NODE" -p "require('$SUITE_DIR/node_modules/@modelcontextprotocol/conformance/package.json').version" 2>/dev/null || true)
if [[ $installed != "$CONFORMANCE_VERSION" ]]; then
  log "installing @modelcontextprotocol/conformance@$CONFORMANCE_VERSION into $SUITE_DIR"
  # npm runs with the new Node first on PATH, so engine checks see Node 22.
  PATH=$(dirname "$NODE"):$PATH npm install --silent --no-audit --no-fund --prefix "$SUITE_DIR" \
    "@modelcontextprotocol/conformance@$CONFORMANCE_VERSION" >&2
fi

# The host and the fixture plugin, built as `make build` builds them.
make --no-print-directory build >&2

WORK=$(mktemp -d "${TMPDIR:-/tmp}/switchboard-conformance.XXXXXX")
SERVER_PID=
cleanup() {
  if [[ -n $SERVER_PID ]]; then
    kill "$SERVER_PID" 2>/dev/null || true
    wait "$SERVER_PID" 2>/dev/null || true
  fi
  if [[ -n ${KEEP:-} ]]; then log "kept $WORK"; else rm -rf "$WORK"; fi
}
trap cleanup EXIT

# Only the fixture plugin, its names bare (prefix = ""): the suite calls
# test_simple_text, not conformance__test_simple_text.
write_config() {
  cat >"$WORK/config.hcl" <<EOF
project_dir = "$WORK/project"
data_dir    = "$WORK/data"

plugin "conformance" {
  path = "$BIN/switchboard-plugin-conformance"
$1}
EOF
}
mkdir -p "$WORK/project"
write_config '  prefix = ""
'
if ! "$BIN/switchboard" validate --config "$WORK/config.hcl" >"$WORK/validate.log" 2>&1; then
  if grep -q '"prefix" is not expected' "$WORK/validate.log"; then
    log "NOTE: this host has no per-server prefix yet; serving the fixtures as conformance__<name>,"
    log "      so every scenario that calls a tool, prompt or resource by its bare name fails"
    write_config ''
  else
    cat "$WORK/validate.log" >&2
    exit 1
  fi
fi

# A free loopback port: the kernel picks one, the host binds it right after.
PORT=${PORT:-$("$NODE" -e 'const s=require("net").createServer().listen(0,"127.0.0.1",()=>{console.log(s.address().port);s.close()})')}
URL=http://127.0.0.1:$PORT/mcp

SWITCHBOARD_LOG_LEVEL=${SWITCHBOARD_LOG_LEVEL:-info} \
  "$BIN/switchboard" serve --config "$WORK/config.hcl" --http "127.0.0.1:$PORT" >"$WORK/host.log" 2>&1 &
SERVER_PID=$!

# Ready once the host says it serves (it binds first, then starts plugins).
deadline=$((SECONDS + 60))
until grep -q "serving MCP at $URL" "$WORK/host.log"; do
  if ! kill -0 "$SERVER_PID" 2>/dev/null || ((SECONDS > deadline)); then
    log "the host did not come up:"
    cat "$WORK/host.log" >&2
    exit 1
  fi
  sleep 0.2
done
log "host serving $URL (log: $WORK/host.log)"

args=(server --url "$URL" -o "$WORK/results")
if [[ -n ${SCENARIO:-} ]]; then args+=(--scenario "$SCENARIO"); else args+=(--suite "${SUITE:-active}"); fi
set +e
"$NODE" "$SUITE_JS" "${args[@]}" >"$WORK/suite.log" 2>&1
rc=$?
set -e

# The suite prints every check; show its summary, and the failed checks
# with their reasons (from the results it wrote, one checks.json a scenario).
sed -n '/=== SUMMARY ===/,$p' "$WORK/suite.log"
if ((rc != 0)); then
  echo
  echo "Failed checks:"
  "$NODE" -e '
    const fs = require("fs"), path = require("path"), dir = process.argv[1];
    for (const d of fs.readdirSync(dir).sort()) {
      const f = path.join(dir, d, "checks.json");
      if (!fs.existsSync(f)) continue;
      for (const c of JSON.parse(fs.readFileSync(f, "utf8")))
        if (c.status === "FAILURE") console.log(`  ${c.id}: ${c.errorMessage || "(no message)"}`);
    }' "$WORK/results" || true
  echo
  if [[ -n ${KEEP:-} ]]; then
    echo "conformance: FAILED (suite exit $rc); suite output $WORK/suite.log, host log $WORK/host.log"
  else
    echo "conformance: FAILED (suite exit $rc); KEEP=1 keeps the suite's output, the host's log and the results"
  fi
  exit 1
fi
echo "conformance: every scenario passed"

# A real TypeScript-SDK client over stdio, with the SDK the suite brought: a
# plugin's resources, an external server's prompts, sampling, log messages.
if [[ -z ${SCENARIO:-} ]]; then
  mkdir -p "$WORK/ts/project"
  go build -o "$WORK/ts/fx" ./internal/fixtures/testplugin
  go build -o "$WORK/ts/ext" ./internal/fixtures/mcpserver
  cat >"$WORK/ts/config.hcl" <<EOF
project_dir = "$WORK/ts/project"
data_dir    = "$WORK/ts/data"
permissions { default = "allow" }
plugin "fx" {
  path = "$WORK/ts/fx"
  env  = { FIXTURE_FEATURES = "1" }
}
external "ext" {
  command = "$WORK/ts/ext"
  env     = { FIXTURE_FEATURES = "1" }
}
EOF
  if ! SWITCHBOARD_LOG_LEVEL=error "$NODE" examples/conformance/tsclient.mjs \
    "$SUITE_DIR/node_modules/@modelcontextprotocol/sdk" "$BIN/switchboard" "$WORK/ts/config.hcl"; then
    echo "conformance: the TypeScript-SDK client test FAILED"
    exit 1
  fi
fi
