// An example Switchboard plugin in Node.js, written against the plugin
// protocol itself (docs/PROTOCOL.md), not the Go SDK: the go-plugin handshake
// on stdout, gRPC over a Unix socket with AutoMTLS, the gRPC health service,
// go-plugin's controller (Shutdown), and the switchboard.plugin.v1.ToolServer
// service from sdk/proto/switchboard/plugin/v1/plugin.proto.
//
// Tools: greet (a greeting), add (two numbers, with a structured result),
// count (counts up with progress events; honours cancellation).
"use strict";

// stdout carries the handshake line and nothing else: anything a library
// prints with console.log goes to stderr instead.
console.log = console.info = console.debug = console.error;

require("reflect-metadata"); // @peculiar/x509 needs it (tsyringe)
const fs = require("node:fs");
const os = require("node:os");
const path = require("node:path");
const crypto = require("node:crypto");
const grpc = require("@grpc/grpc-js");
const protoLoader = require("@grpc/proto-loader");
const { HealthImplementation } = require("grpc-health-check");
const x509 = require("@peculiar/x509");

const PLUGIN_NAME = "node-hello";
const PLUGIN_VERSION = require("./package.json").version;
// The protocol versions this plugin speaks. Version 2 adds resources,
// prompts and client requests; this plugin offers none of them but the
// Notifications stream, which is all a version 2 plugin must answer.
const VERSIONS = [1, 2];
// go-plugin's handshake: the host sets this cookie in the environment.
const COOKIE_KEY = "SWITCHBOARD_PLUGIN";
const COOKIE_VALUE = "d1b0f5a3-mcp-tool-server";
// Both sides raise gRPC's 4 MB default to the protocol's 256 MiB.
const MAX_MESSAGE = 256 << 20;

// ---- logging: hclog JSON lines on stderr, re-logged by the host ----------

const LEVELS = ["trace", "debug", "info", "warn", "error"];
const minLevel = Math.max(0, LEVELS.indexOf(process.env.SWITCHBOARD_PLUGIN_LOG_LEVEL || "info"));

function log(level, message, fields = {}) {
  if (LEVELS.indexOf(level) < minLevel) return;
  const line = { "@level": level, "@message": message, "@timestamp": new Date().toISOString(), ...fields };
  process.stderr.write(JSON.stringify(line) + "\n");
}

// ---- the protocol definition --------------------------------------------

// The .proto is the contract. Inside this repository it is read from
// sdk/proto; a plugin kept elsewhere copies the file beside plugin.js
// (proto/switchboard/plugin/v1/plugin.proto).
function protoRoot() {
  const candidates = [
    process.env.SWITCHBOARD_PROTO_DIR,
    path.join(__dirname, "proto"),
    path.join(__dirname, "..", "..", "sdk", "proto"),
  ].filter(Boolean);
  for (const dir of candidates) {
    if (fs.existsSync(path.join(dir, "switchboard", "plugin", "v1", "plugin.proto"))) return dir;
  }
  throw new Error(`plugin.proto not found in ${candidates.join(", ")}: copy sdk/proto/switchboard/plugin/v1/plugin.proto into ${path.join(__dirname, "proto", "switchboard", "plugin", "v1")}`);
}

const PROTO_DIR = protoRoot();
const pkgDef = protoLoader.loadSync("switchboard/plugin/v1/plugin.proto", {
  includeDirs: [PROTO_DIR],
  keepCase: true, // field names as in the .proto (call_id, input_schema)
  longs: String, // uint64 call ids stay exact
  enums: String,
  defaults: false,
  oneofs: true, // a message's oneof says which field is set (msg.kind)
});
const v1 = grpc.loadPackageDefinition(pkgDef).switchboard.plugin.v1;

// ---- the tools -----------------------------------------------------------

const text = (t) => ({ content: [{ text: { text: t } }] });
const failure = (t) => ({ content: [{ text: { text: t } }], is_error: true });

// PluginError ends a call with a protocol error code instead of a result:
// the tool did not run (unknown tool, arguments it cannot use) or was cut
// short (cancelled).
class PluginError extends Error {
  constructor(code, message) {
    super(message);
    this.code = code;
  }
}

const sleep = (ms, signal) =>
  new Promise((resolve, reject) => {
    const t = setTimeout(resolve, ms);
    signal.addEventListener("abort", () => {
      clearTimeout(t);
      reject(new PluginError("ERROR_CODE_CANCELLED", `cancelled: ${signal.reason || "by the host"}`));
    }, { once: true });
  });

const tools = {
  greet: {
    spec: {
      title: "Greet someone",
      description: "Answer with a friendly greeting for name (from Node.js).",
      input_schema: {
        type: "object",
        properties: { name: { type: "string", description: "Who to greet" } },
        required: ["name"],
        additionalProperties: false,
      },
      annotations: { read_only_hint: true, idempotent_hint: true, open_world_hint: false },
      access: "ACCESS_READ",
    },
    run: async (args) => {
      const name = String(args.name || "").trim();
      if (!name) return failure("name is empty: pass the name of the person to greet");
      const greeting = process.env.GREETING || "Hello";
      return text(`${greeting}, ${name}! (from Node.js ${process.version})`);
    },
  },
  add: {
    spec: {
      title: "Add two numbers",
      description: "Return a + b, as text and as a structured result {sum}.",
      input_schema: {
        type: "object",
        properties: { a: { type: "number" }, b: { type: "number" } },
        required: ["a", "b"],
        additionalProperties: false,
      },
      output_schema: {
        type: "object",
        properties: { sum: { type: "number" } },
        required: ["sum"],
      },
      annotations: { read_only_hint: true, idempotent_hint: true, open_world_hint: false },
      access: "ACCESS_READ",
    },
    run: async (args) => {
      const sum = Number(args.a) + Number(args.b);
      if (!Number.isFinite(sum)) return failure("a and b must be finite numbers");
      return { ...text(String(sum)), structured_content: Buffer.from(JSON.stringify({ sum })) };
    },
  },
  count: {
    spec: {
      title: "Count up",
      description: "Count from 1 to n, one step every delay_ms milliseconds, sending a progress event per step.",
      input_schema: {
        type: "object",
        properties: {
          n: { type: "integer", minimum: 1, maximum: 1000 },
          delay_ms: { type: "integer", minimum: 0, maximum: 10000 },
        },
        required: ["n"],
        additionalProperties: false,
      },
      annotations: { read_only_hint: true, open_world_hint: false },
      access: "ACCESS_READ",
      skip_duplicate_check: true,
    },
    run: async (args, { progress, signal, logEvent }) => {
      const n = args.n;
      for (let i = 1; i <= n; i++) {
        await sleep(args.delay_ms || 0, signal);
        progress(i, n, `step ${i} of ${n}`);
      }
      logEvent("LOG_LEVEL_INFO", "counted", { n });
      return text(`counted to ${n}`);
    },
  },
};

// ---- the ToolServer service ----------------------------------------------

let configured = null; // the ConfigureRequest, once received
let negotiated = 0; // the protocol version chosen in the handshake

const toolServer = {
  // Configure comes exactly once, before Describe.
  Configure(call, callback) {
    if (configured) {
      callback({ code: grpc.status.FAILED_PRECONDITION, details: "plugin is already configured" });
      return;
    }
    const req = call.request;
    let settings = {};
    if (req.settings_json && req.settings_json.length) {
      try {
        settings = JSON.parse(req.settings_json.toString("utf8"));
      } catch (e) {
        // INVALID_ARGUMENT: the host reports "refused its configuration".
        callback({ code: grpc.status.INVALID_ARGUMENT, details: `settings are not JSON: ${e.message}` });
        return;
      }
    }
    configured = { ...req, settings };
    log("debug", "configured", { server_name: req.server_name, data_dir: req.data_dir });
    callback(null, {});
  },

  Describe(call, callback) {
    callback(null, {
      name: PLUGIN_NAME,
      plugin_version: PLUGIN_VERSION,
      sdk_version: `node ${process.version}, @grpc/grpc-js ${require("@grpc/grpc-js/package.json").version}`,
      instructions: "Greets people and adds numbers, from a plugin written in Node.js.",
      tools: Object.entries(tools).map(([name, t]) => ({
        ...t.spec,
        name,
        input_schema: Buffer.from(JSON.stringify(t.spec.input_schema)),
        output_schema: t.spec.output_schema ? Buffer.from(JSON.stringify(t.spec.output_schema)) : undefined,
      })),
      // What this plugin needs to read inside its sandbox: its own folder
      // (node_modules) and the .proto. The host does not grant it on the
      // plugin's word; it warns with the config lines to add.
      sandbox: { read: [__dirname, PROTO_DIR] },
      protocol_versions: VERSIONS,
    });
  },

  // Only asked for tools with custom_permission_pattern; none here.
  PermissionPattern(call, callback) {
    callback(null, { patterns: [] });
  },

  // CallTool: one stream for the plugin's life, many calls multiplexed on it.
  CallTool(stream) {
    const running = new Map(); // call_id -> AbortController
    const send = (ev) => {
      if (!stream.writableEnded && !stream.destroyed) stream.write(ev);
    };
    stream.on("data", (req) => {
      const id = req.call_id;
      switch (req.kind) {
        case "call":
          runCall(id, req.call, running, send);
          break;
        case "cancel": {
          const ac = running.get(id);
          if (ac) ac.abort(req.cancel.reason || "cancelled by the host");
          break;
        }
        case "client_response":
          // Answers to requests this plugin made of the client (version 2);
          // this plugin makes none.
          break;
        default:
        // A kind from a newer host: ignore it.
      }
    });
    const endAll = () => {
      for (const ac of running.values()) ac.abort("the host closed the call stream");
    };
    stream.on("end", () => {
      endAll();
      stream.end();
    });
    stream.on("error", endAll);
    stream.on("cancelled", endAll);
  },

  // Version 2: the host opens this once after Describe. The first message
  // (no kind) says the plugin listens; list changes and resource updates
  // would follow. It stays open until the host cancels it.
  Notifications(stream) {
    stream.write({});
  },
  // The other version 2 RPCs are left unimplemented (UNIMPLEMENTED): this
  // plugin describes no resources, prompts or completions, so the host
  // never calls them.
};

async function runCall(id, call, running, send) {
  if (running.has(id)) {
    send({ call_id: id, error: { code: "ERROR_CODE_INTERNAL", message: `call id ${id} is already in flight` } });
    return;
  }
  const ac = new AbortController();
  running.set(id, ac);
  const tool = tools[call.tool];
  try {
    if (!tool) throw new PluginError("ERROR_CODE_UNKNOWN_TOOL", `no tool named ${JSON.stringify(call.tool)}`);
    let args;
    try {
      args = call.arguments && call.arguments.length ? JSON.parse(call.arguments.toString("utf8")) : {};
    } catch (e) {
      throw new PluginError("ERROR_CODE_INVALID_ARGUMENTS", `arguments are not JSON: ${e.message}`);
    }
    const ctx = {
      signal: ac.signal,
      owner: call.owner,
      progress: (progress, total, message) => {
        if (call.want_progress && !ac.signal.aborted) send({ call_id: id, progress: { progress, total, message } });
      },
      logEvent: (level, message, fields) =>
        send({ call_id: id, log: { level, message, fields_json: Buffer.from(JSON.stringify(fields || {})) } }),
    };
    const result = await tool.run(args, ctx);
    if (ac.signal.aborted) throw new PluginError("ERROR_CODE_CANCELLED", `cancelled: ${ac.signal.reason}`);
    send({ call_id: id, result });
  } catch (e) {
    const code = e instanceof PluginError ? e.code : "ERROR_CODE_INTERNAL";
    if (code === "ERROR_CODE_INTERNAL") log("error", "tool failed", { tool: call.tool, error: String(e && e.stack) });
    send({ call_id: id, error: { code, message: e.message } });
  } finally {
    running.delete(id);
  }
}

// ---- go-plugin's side services -------------------------------------------

// plugin.GRPCController/Shutdown(Empty) returns (Empty): the host's graceful
// stop. Empty has no fields, so both messages are zero bytes on the wire.
const emptyMethod = {
  requestStream: false,
  responseStream: false,
  requestSerialize: () => Buffer.alloc(0),
  requestDeserialize: () => ({}),
  responseSerialize: () => Buffer.alloc(0),
  responseDeserialize: () => ({}),
};
const controllerService = { Shutdown: { ...emptyMethod, path: "/plugin.GRPCController/Shutdown" } };

// ---- AutoMTLS ------------------------------------------------------------

// selfSigned makes this start's certificate: ECDSA P-256, valid for
// "localhost" (the name the host verifies), usable for server and client
// authentication. It returns the PEM certificate and key, and the DER
// certificate for the handshake line.
async function selfSigned() {
  x509.cryptoProvider.set(crypto.webcrypto);
  const alg = { name: "ECDSA", namedCurve: "P-256", hash: "SHA-256" };
  const keys = await crypto.webcrypto.subtle.generateKey(alg, true, ["sign", "verify"]);
  const now = Date.now();
  const cert = await x509.X509CertificateGenerator.createSelfSigned({
    serialNumber: crypto.randomBytes(16).toString("hex").replace(/^[89a-f]/, "1"),
    name: "CN=localhost, O=switchboard-plugin",
    notBefore: new Date(now - 30_000),
    notAfter: new Date(now + 30 * 24 * 3600_000),
    keys,
    signingAlgorithm: alg,
    extensions: [
      new x509.BasicConstraintsExtension(true, undefined, true),
      new x509.KeyUsagesExtension(x509.KeyUsageFlags.digitalSignature | x509.KeyUsageFlags.keyCertSign, true),
      new x509.ExtendedKeyUsageExtension([x509.ExtendedKeyUsage.serverAuth, x509.ExtendedKeyUsage.clientAuth]),
      new x509.SubjectAlternativeNameExtension([{ type: "dns", value: "localhost" }]),
    ],
  });
  const pkcs8 = Buffer.from(await crypto.webcrypto.subtle.exportKey("pkcs8", keys.privateKey));
  const keyPEM = crypto.createPrivateKey({ key: pkcs8, format: "der", type: "pkcs8" }).export({ format: "pem", type: "pkcs8" });
  return { certPEM: Buffer.from(cert.toString("pem")), keyPEM: Buffer.from(keyPEM), der: Buffer.from(cert.rawData) };
}

// ---- the handshake and serving -------------------------------------------

// negotiate picks the highest version both sides speak. With none shared it
// says so on stderr (the host names both lists in its refusal) and answers
// with its own highest version, which the host then refuses.
function negotiate() {
  const host = (process.env.PLUGIN_PROTOCOL_VERSIONS || "")
    .split(",")
    .map((s) => parseInt(s, 10))
    .filter(Number.isInteger);
  const shared = VERSIONS.filter((v) => host.includes(v));
  if (shared.length) return Math.max(...shared);
  process.stderr.write(`switchboard plugin protocol versions: ${VERSIONS.join(" ")}\n`);
  return Math.max(...VERSIONS);
}

async function main() {
  if (process.env[COOKIE_KEY] !== COOKIE_VALUE) {
    process.stderr.write("This is a Switchboard plugin: it is started by the switchboard host (a plugin block in its config), not by hand.\n");
    process.exit(1);
  }
  negotiated = negotiate();

  const server = new grpc.Server({
    "grpc.max_receive_message_length": MAX_MESSAGE,
    "grpc.max_send_message_length": MAX_MESSAGE,
  });
  server.addService(v1.ToolServer.service, toolServer);
  new HealthImplementation({ plugin: "SERVING", "": "SERVING" }).addToServer(server);
  let stopping = false;
  const stop = (why, code = 0) => {
    if (stopping) return;
    stopping = true;
    log("debug", "stopping", { why });
    // Running calls end with their streams; give them a moment, then go.
    server.tryShutdown(() => process.exit(code));
    setTimeout(() => process.exit(code), 1000).unref();
  };
  server.addService(controllerService, {
    Shutdown: (call, callback) => {
      callback(null, {});
      setImmediate(() => stop("the host asked"));
    },
  });

  // The host sends its certificate (PEM) in PLUGIN_CLIENT_CERT; the plugin
  // serves TLS with a certificate of its own and accepts only clients that
  // present the host's.
  let creds = grpc.ServerCredentials.createInsecure();
  let certField = "";
  if (process.env.PLUGIN_CLIENT_CERT) {
    const { certPEM, keyPEM, der } = await selfSigned();
    creds = grpc.ServerCredentials.createSsl(
      Buffer.from(process.env.PLUGIN_CLIENT_CERT),
      [{ private_key: keyPEM, cert_chain: certPEM }],
      true,
    );
    // The handshake carries the raw DER certificate in unpadded base64.
    certField = der.toString("base64").replace(/=+$/, "");
  }

  // A Unix socket in the folder the host made for it (the one place a
  // sandboxed plugin may create files besides its own state).
  const dir = process.env.PLUGIN_UNIX_SOCKET_DIR || fs.mkdtempSync(path.join(os.tmpdir(), "plugin"));
  const socket = path.join(dir, `plugin-${process.pid}.sock`);
  await new Promise((resolve, reject) =>
    server.bindAsync(`unix:${socket}`, creds, (err) => (err ? reject(err) : resolve())),
  );

  // CORE-PROTOCOL|APP-PROTOCOL|NETWORK|ADDRESS|PROTOCOL|SERVER-CERT
  process.stdout.write(`1|${negotiated}|unix|${socket}|grpc|${certField}\n`);
  log("debug", "serving", { socket, protocol: negotiated });

  // Stop with the host: SIGTERM (the host's stop, or its parent-death
  // signal) and a change of parent (the host died; we were re-parented).
  process.on("SIGTERM", () => stop("SIGTERM"));
  process.on("SIGINT", () => {}); // go-plugin plugins ignore interrupts: Ctrl-C in the host's terminal is the host's
  // (process.ppid is read once at start, so ask whether that process lives.)
  const ppid = process.ppid;
  setInterval(() => {
    try {
      process.kill(ppid, 0);
    } catch {
      stop("the host is gone", 1);
    }
  }, 250).unref();
}

main().catch((e) => {
  log("error", "plugin failed to start", { error: String(e && e.stack) });
  process.exit(1);
});
