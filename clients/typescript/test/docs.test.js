// The examples of docs/clients.md's TypeScript section, run as written — the dev address and the
// receiver's port swapped for this stack's — as files of a user's inside the package, importing it
// by its name.
import assert from "node:assert/strict";
import { execFile, spawn } from "node:child_process";
import { randomUUID } from "node:crypto";
import { readFileSync, rmSync, writeFileSync } from "node:fs";
import { connect } from "node:net";
import { test } from "node:test";
import { promisify } from "node:util";

import { freePort } from "./stack.js";
import { admin, baseUrl, newTenant } from "./support.js";

const page = readFileSync(new URL("../../../docs/clients.md", import.meta.url), "utf8");
const section = page.slice(page.indexOf("## TypeScript")).split(/\n## /)[0];
const [script, graph, receiver] = [...section.matchAll(/```js\n([\s\S]*?)```/g)].map((m) => m[1]);
const host = new URL(baseUrl).host;

/**
 * The example as a file of the package's directory (where `@scheduler/client` names the package).
 * @param {string} source
 */
function exampleFile(source) {
  const path = new URL(`./.example-${randomUUID()}.mjs`, import.meta.url);
  writeFileSync(path, source.replaceAll("127.0.0.1:8000", host));
  return path;
}

test("the client example runs on the dev stack's demo tenant", async () => {
  const { data: key } = await admin.api.POST("/tenants/{tenant_id}/keys", { params: { path: { tenant_id: "demo" } } });
  assert.ok(key);
  const file = exampleFile(script);
  try {
    const env = { ...process.env, SCHEDULER_API_URL: baseUrl, SCHEDULER_API_KEY: key.api_key };
    const { stdout } = await promisify(execFile)(process.execPath, [file.pathname], { env, timeout: 90_000 });
    assert.equal(stdout, "succeeded 1\n422 invalid_input job\n");
  } finally {
    rmSync(file);
  }
});

test("the dependencies, groups and events example runs on the dev stack's demo tenant", async () => {
  const { data: key } = await admin.api.POST("/tenants/{tenant_id}/keys", { params: { path: { tenant_id: "demo" } } });
  assert.ok(key);
  const file = exampleFile(graph);
  try {
    const env = { ...process.env, SCHEDULER_API_URL: baseUrl, SCHEDULER_API_KEY: key.api_key };
    const { stdout } = await promisify(execFile)(process.execPath, [file.pathname], { env, timeout: 90_000 });
    assert.equal(stdout, "succeeded true\n2 2 true\nreport\n");
  } finally {
    rmSync(file);
  }
});

test("README's example runs on the dev stack's demo tenant", async () => {
  const readme = readFileSync(new URL("../../../README.md", import.meta.url), "utf8");
  const [, example] = readme.slice(readme.indexOf("## Use it from your service")).match(/```js\n([\s\S]*?)```/) ?? [];
  assert.ok(example);
  const { data: key } = await admin.api.POST("/tenants/{tenant_id}/keys", { params: { path: { tenant_id: "demo" } } });
  assert.ok(key);
  const file = exampleFile(example);
  try {
    const env = { ...process.env, SCHEDULER_API_URL: baseUrl, SCHEDULER_API_KEY: key.api_key };
    const { stdout } = await promisify(execFile)(process.execPath, [file.pathname], { env, timeout: 90_000 });
    assert.equal(stdout, "succeeded\n");
  } finally {
    rmSync(file);
  }
});

test("the receiver example accepts what is signed for it and refuses what is not", async () => {
  const { id: tenant, signingSecret, client } = await newTenant("receiver");
  const { id: stranger, client: strangers } = await newTenant("stranger");
  const port = await freePort();
  const file = exampleFile(receiver.replaceAll("3000", String(port)));
  const other = "whsec_" + Buffer.alloc(32, 1).toString("base64");
  const env = { ...process.env, SIGNING_SECRETS: `${other},${signingSecret}` };
  const server = spawn(process.execPath, [file.pathname], { env, stdio: ["ignore", "pipe", "inherit"] });
  let out = "";
  server.stdout.on("data", (chunk) => (out += chunk));
  try {
    await listening(port);
    const target = { type: /** @type {const} */ ("http"), url: `http://127.0.0.1:${port}/hook`, method: /** @type {const} */ ("POST") };
    await client.putJob(tenant, "mine", { target, max_attempts: 1 });
    const mine = await client.wait((await client.submitRun(tenant, "mine", { n: 1 })).id);
    assert.equal(mine.status, "succeeded");
    assert.equal(out, `${mine.id} {"n":1}\n`);
    // Another tenant's call to the same receiver is signed with a secret it does not hold.
    await strangers.putJob(stranger, "theirs", { target, max_attempts: 1 });
    const theirs = await strangers.wait((await strangers.submitRun(stranger, "theirs", { n: 2 })).id);
    assert.equal(theirs.status, "failed");
    assert.equal(theirs.attempts[0]?.http_status, 401);
    assert.equal(out, `${mine.id} {"n":1}\n`);
  } finally {
    server.kill();
    rmSync(file);
  }
});

/** @param {number} port */
async function listening(port) {
  for (let tries = 0; ; tries++) {
    const up = await new Promise((resolve) => {
      const socket = connect(port, "127.0.0.1", () => resolve(socket.end() && true));
      socket.on("error", () => resolve(false));
    });
    if (up) return;
    if (tries > 100) throw new Error(`nothing listens on ${port}`);
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
}
