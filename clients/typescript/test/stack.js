// A live stack for the tests: `scheduler dev` (API, engine, worker and the echo receiver in one
// process) in a temporary directory, on embedded Postgres and NATS, or on the database that
// SCHEDULER_DATABASE_URL names. Its data dir holds the admin token it made.
import { spawn } from "node:child_process";
import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { createServer } from "node:net";
import { tmpdir } from "node:os";
import { delimiter, join } from "node:path";
import { fileURLToPath } from "node:url";

const repository = fileURLToPath(new URL("../../..", import.meta.url));
// A tenant's backlog quota small enough for a test to fill (the over-quota test), and large enough
// for every other test's tenant.
export const TENANT_MAX_PENDING = 20;

/**
 * @typedef {object} Stack
 * @property {string} baseUrl
 * @property {string} adminToken
 * @property {() => string} log what it wrote to stderr (attempts' outcomes, warnings)
 * @property {() => Promise<void>} stop
 */

/** @returns {Promise<Stack>} */
export async function startDev() {
  const dir = mkdtempSync(join(tmpdir(), "scheduler-client-test-"));
  const port = await freePort();
  /** @type {Record<string, string>} */
  const env = { PYTHONUNBUFFERED: "1" };
  for (const [name, value] of Object.entries(process.env)) {
    if (value !== undefined && !name.startsWith("SCHEDULER_")) env[name] = value;
  }
  env.PYTHONPATH = [repository, process.env.PYTHONPATH].filter(Boolean).join(delimiter);
  env.SCHEDULER_PORT = String(port);
  env.SCHEDULER_TENANT_MAX_PENDING = String(TENANT_MAX_PENDING);
  if (process.env.SCHEDULER_DATABASE_URL) env.SCHEDULER_DATABASE_URL = process.env.SCHEDULER_DATABASE_URL;

  const python = process.env.SCHEDULER_PYTHON ?? "python3";
  // A process group of its own: stopping it is Ctrl-C to the group, as in a terminal.
  const dev = spawn(python, ["-m", "app.cli", "dev"], { cwd: dir, env, detached: true });
  let out = "";
  let err = "";
  dev.stdout.on("data", (chunk) => (out += chunk));
  dev.stderr.on("data", (chunk) => (err += chunk));
  const exited = new Promise((resolve) => dev.on("exit", resolve));

  const stop = async () => {
    if (dev.exitCode === null && dev.signalCode === null && dev.pid) {
      process.kill(-dev.pid, "SIGINT");
      const timer = setTimeout(() => dev.pid && process.kill(-dev.pid, "SIGKILL"), 60_000);
      await exited;
      clearTimeout(timer);
    }
    rmSync(dir, { recursive: true, force: true });
  };

  const deadline = Date.now() + 180_000;
  while (!out.includes("Ctrl-C stops everything.")) {
    if (dev.exitCode !== null || Date.now() > deadline) {
      await stop();
      throw new Error(`scheduler dev did not start:\n${out}\n${err}`);
    }
    await new Promise((resolve) => setTimeout(resolve, 200));
  }
  const adminToken = readFileSync(join(dir, ".scheduler-dev", "admin_token"), "utf8").trim();
  return { baseUrl: `http://127.0.0.1:${port}`, adminToken, log: () => err, stop };
}

/** @returns {Promise<number>} */
export function freePort() {
  return new Promise((resolve, reject) => {
    const server = createServer();
    server.on("error", reject);
    server.listen(0, "127.0.0.1", () => {
      const address = server.address();
      server.close(() => (typeof address === "object" && address ? resolve(address.port) : reject()));
    });
  });
}
