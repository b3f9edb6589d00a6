// One `!echo` turn through the official TypeScript ACP SDK (@agentclientprotocol/sdk),
// driving `dsh acp` as an editor would: the baseline `dsh exec` is measured against
// (benches/cli/measure.py). Prints one line when the first `session/update` arrives,
// then exits when the turn ends. Usage: node sdk_turn.mjs DSH SOCKET STATE CONFIG CWD
import { spawn } from "node:child_process";
import { Readable, Writable } from "node:stream";
import * as acp from "@agentclientprotocol/sdk";

const [dsh, socket, state, config, cwd] = process.argv.slice(2);
const child = spawn(dsh, ["acp", "--socket", socket, "--state-dir", state, "--config", config], {
  stdio: ["pipe", "pipe", "inherit"],
});
const stream = acp.ndJsonStream(Writable.toWeb(child.stdin), Readable.toWeb(child.stdout));
let first = false;
const app = acp
  .client({ name: "sdk-bench" })
  .onNotification(acp.methods.client.session.update, () => {
    if (!first) {
      first = true;
      process.stdout.write("first\n");
    }
  })
  .onRequest(acp.methods.client.session.requestPermission, () => ({
    outcome: { outcome: "cancelled" },
  }));
await app.connectWith(stream, async (ctx) => {
  await ctx.request(acp.methods.agent.initialize, {
    protocolVersion: acp.PROTOCOL_VERSION,
    clientCapabilities: {},
  });
  const session = await ctx.request(acp.methods.agent.session.new, { cwd, mcpServers: [] });
  const answer = await ctx.request(acp.methods.agent.session.prompt, {
    sessionId: session.sessionId,
    prompt: [{ type: "text", text: "!echo hi" }],
  });
  process.stdout.write(`stop ${answer.stopReason}\n`);
});
child.kill();
process.exit(0);
