// The official TypeScript MCP SDK's client against Airlock's MCP server
// (cmd/airlock/mcpserver_e2e_test.go): list the tools, an ungated call,
// then a gated one that waits for a person's Allow in chat. It prints one
// JSON line with what it saw.
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";

const [url, token] = process.argv.slice(2);
const transport = new StreamableHTTPClientTransport(new URL(url), {
  requestInit: { headers: { Authorization: `Bearer ${token}` } },
});
const client = new Client({ name: "airlock-ts-e2e", version: "1.0.0" });
await client.connect(transport);

const text = (r) => (r.content || []).map((c) => c.text).join("\n");
const out = {};
out.tools = (await client.listTools()).tools.map((t) => t.name).sort();
const ungated = await client.callTool({ name: "service_status", arguments: { service: "ts" } });
out.ungated = { isError: !!ungated.isError, text: text(ungated) };
let progress = 0;
const gated = await client.callTool({ name: "deploy", arguments: { service: "ts" } }, undefined, {
  timeout: 60000,
  resetTimeoutOnProgress: true,
  onprogress: () => { progress++; },
});
out.gated = { isError: !!gated.isError, text: text(gated) };
out.progress = progress;
console.log(JSON.stringify(out));
await client.close();
