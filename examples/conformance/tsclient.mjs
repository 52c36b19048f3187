// A real TypeScript-SDK client against `switchboard serve` over stdio, with
// a plugin (protocol 2) and an external MCP server behind it: it lists and
// reads the plugin's resources, lists and gets the external server's
// prompts, answers the plugin's sampling request and receives its log
// messages. Run by examples/conformance/run.sh (make conformance) with the
// SDK the conformance suite installs.
//
//   node tsclient.mjs SDK_DIR SWITCHBOARD CONFIG
import assert from "node:assert/strict";
import path from "node:path";

const [sdkDir, switchboard, config] = process.argv.slice(2);
const sdk = (p) => import(path.join(sdkDir, "dist/esm", p));
const { Client } = await sdk("client/index.js");
const { StdioClientTransport } = await sdk("client/stdio.js");
const { CreateMessageRequestSchema, LoggingMessageNotificationSchema } = await sdk("types.js");

const client = new Client({ name: "switchboard-ts-test", version: "1.0.0" }, { capabilities: { sampling: {} } });
let sampled = null;
client.setRequestHandler(CreateMessageRequestSchema, async (req) => {
  sampled = req.params;
  return { role: "assistant", content: { type: "text", text: "four" }, model: "ts-model" };
});
const logs = [];
client.setNotificationHandler(LoggingMessageNotificationSchema, (n) => logs.push(n.params));

await client.connect(new StdioClientTransport({ command: switchboard, args: ["serve", "--config", config], stderr: "inherit" }));
try {
  // The plugin's resources and templates.
  const { resources } = await client.listResources();
  assert.ok(resources.some((r) => r.uri === "fixture://static"), `resources: ${JSON.stringify(resources)}`);
  const read = await client.readResource({ uri: "fixture://static" });
  assert.equal(read.contents[0].text, "static text");
  const note = await client.readResource({ uri: "fixture://notes/7" });
  assert.equal(note.contents[0].text, "note 7");

  // The external server's prompts.
  const { prompts } = await client.listPrompts();
  assert.ok(prompts.some((p) => p.name === "ext__summarize"), `prompts: ${JSON.stringify(prompts)}`);
  const got = await client.getPrompt({ name: "ext__summarize", arguments: { topic: "gateways" } });
  assert.equal(got.messages[0].content.text, "Summarize gateways.");

  // The plugin asks the client's model in the middle of a call.
  const asked = await client.callTool({ name: "fx__ask_model", arguments: { text: "2+2?" } });
  assert.ok(!asked.isError, JSON.stringify(asked));
  assert.match(asked.content[0].text, /ts-model said: four/);
  assert.equal(sampled?.messages?.[0]?.content?.text, "2+2?");

  // The plugin's log messages, at the level the client set.
  await client.setLoggingLevel("warning");
  const chatty = await client.callTool({ name: "fx__chatty", arguments: {} });
  assert.ok(!chatty.isError, JSON.stringify(chatty));
  for (let i = 0; i < 50 && !logs.some((l) => l.level === "warning"); i++) await new Promise((r) => setTimeout(r, 100));
  assert.ok(logs.some((l) => l.level === "warning" && JSON.stringify(l.data).includes("a warning line")), `logs: ${JSON.stringify(logs)}`);
  assert.ok(!logs.some((l) => l.level === "debug"), `a debug line came through at level warning: ${JSON.stringify(logs)}`);
  console.log("ts client: resources, external prompts, sampling and log messages through the host: ok");
} finally {
  await client.close();
}
