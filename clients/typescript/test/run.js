// `npm test`'s runner: starts a live stack (test/stack.js) unless SCHEDULER_API_URL and
// SCHEDULER_ADMIN_TOKEN name one, runs every test file against it with node's test runner, and
// stops the stack however the tests ended.
import { spawn } from "node:child_process";
import { readdirSync } from "node:fs";
import { fileURLToPath } from "node:url";

import { startDev } from "./stack.js";

if (Number(process.versions.node.split(".")[0]) < 20) {
  console.error(`Node.js 20 or later is needed (AbortSignal.any); this is ${process.version}`);
  process.exit(1);
}

const here = fileURLToPath(new URL(".", import.meta.url));
const files = readdirSync(here)
  .filter((name) => name.endsWith(".test.js"))
  .map((name) => here + name);

const given = process.env.SCHEDULER_API_URL && process.env.SCHEDULER_ADMIN_TOKEN;
const stack = given ? null : await startDev();
const env = stack
  ? { ...process.env, SCHEDULER_API_URL: stack.baseUrl, SCHEDULER_ADMIN_TOKEN: stack.adminToken }
  : process.env;

const tests = spawn(process.execPath, ["--test", ...files], { env, stdio: "inherit" });
for (const signal of /** @type {const} */ (["SIGINT", "SIGTERM"])) {
  process.on(signal, () => tests.kill(signal));
}
const code = await new Promise((resolve) => tests.on("exit", (status) => resolve(status ?? 1)));
if (code !== 0 && stack) console.error(`scheduler dev's stderr, last lines:\n${stack.log().slice(-6000)}`);
await stack?.stop();
process.exit(code);
