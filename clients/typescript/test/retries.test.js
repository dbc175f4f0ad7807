// Tries again, under one Idempotency-Key: a submission over the tenant's quota (429, Retry-After)
// once room is made, and a submission whose answer was lost with its connection. Either way one run.
import assert from "node:assert/strict";
import { createConnection, createServer } from "node:net";
import { test } from "node:test";

import { ApiError, Client } from "../src/index.js";
import { freePort, TENANT_MAX_PENDING } from "./stack.js";
import { baseUrl, newTenant, recording } from "./support.js";

const HOUR = 3600_000;

test("429 over quota: tried again after Retry-After under the same key, one run", async () => {
  const observed = recording();
  const { id: tenant, apiKey, client } = await newTenant("quota", { fetch: observed.fetch });
  await client.putJob(tenant, "report", { target: { type: "noop" } });
  const later = new Date(Date.now() + HOUR);
  const backlog = [];
  for (let i = 0; i < TENANT_MAX_PENDING; i++) {
    backlog.push((await client.submitRun(tenant, "report", { i }, { scheduledAt: later })).id);
  }
  // Without retries, the 429 itself.
  const impatient = new Client({ baseUrl, apiKey, retries: 0 });
  await assert.rejects(impatient.submitRun(tenant, "report"), (error) => {
    assert.ok(error instanceof ApiError);
    assert.equal(error.status, 429);
    assert.equal(error.code, "over_quota");
    return true;
  });

  const before = observed.sent.length;
  const submission = client.submitRun(tenant, "report", { last: true });
  // Room is made once the first try was refused: the client waits its Retry-After and succeeds.
  while (!observed.sent.slice(before).some((s) => s.status === 429)) {
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
  await client.cancelRun(backlog[0]);
  const run = await submission;

  const tries = observed.sent.slice(before).filter((s) => s.url.endsWith("/runs"));
  assert.ok(tries.length >= 2, `${tries.length} tries`);
  assert.equal(tries[0].status, 429);
  assert.equal(tries.at(-1)?.status, 201);
  assert.deepEqual(new Set(tries.map((t) => t.headers.get("Idempotency-Key"))), new Set([run.idempotency_key]));
  assert.equal(await runsWithKey(client, tenant, run.idempotency_key), 1);
});

test("an answer lost with its connection: the submission is sent again and answered with its run", async () => {
  const { id: tenant, apiKey, client } = await newTenant("lossy");
  await client.putJob(tenant, "report", { target: { type: "noop" } });
  const proxy = await lossyProxy(new URL(baseUrl));
  try {
    const observed = recording();
    const through = new Client({ baseUrl: proxy.url, apiKey, fetch: observed.fetch });
    proxy.loseNextAnswer();
    const later = new Date(Date.now() + HOUR);
    const run = await through.submitRun(tenant, "report", { n: 1 }, { scheduledAt: later });
    const [lost, again, ...more] = observed.sent;
    assert.deepEqual(more, []);
    assert.ok(lost.failed instanceof TypeError, String(lost.failed));
    assert.equal(again.status, 200); // the run the lost try made, not a second one (201)
    assert.equal(lost.headers.get("Idempotency-Key"), again.headers.get("Idempotency-Key"));
    assert.equal(await runsWithKey(client, tenant, run.idempotency_key), 1);

    // A cancel carries no key: sent once, its loss is the caller's to handle.
    proxy.loseNextAnswer();
    await assert.rejects(through.cancelRun(run.id), TypeError);
    assert.equal(observed.sent.length, 3);
    assert.equal((await client.getRun(run.id)).status, "cancelled");
  } finally {
    await proxy.close();
  }
});

test("a refused connection is tried `retries` more times, then thrown", async () => {
  const observed = recording();
  const nowhere = new Client({ baseUrl: `http://127.0.0.1:${await freePort()}`, apiKey: "x", retries: 2, fetch: observed.fetch });
  await assert.rejects(nowhere.getRun("0"), TypeError);
  assert.equal(observed.sent.length, 3);
});

/**
 * @param {Client} client
 * @param {string} tenant
 * @param {string | null} key
 */
async function runsWithKey(client, tenant, key) {
  let n = 0;
  for await (const run of client.listRuns(tenant)) if (run.idempotency_key === key) n++;
  return n;
}

/**
 * A TCP proxy to `target` that can lose an answer: after `loseNextAnswer()`, the next request
 * reaches the API whole, and its connection is closed as the first byte of the answer comes back.
 * @param {URL} target
 */
async function lossyProxy(target) {
  let losing = false;
  /** @type {Set<import("node:net").Socket>} */
  const open = new Set();
  const server = createServer((client) => {
    const upstream = createConnection(Number(target.port), target.hostname);
    for (const socket of [client, upstream]) {
      open.add(socket);
      socket.on("close", () => open.delete(socket));
      socket.on("error", () => {});
    }
    client.on("close", () => upstream.destroy());
    upstream.on("close", () => client.destroy());
    client.pipe(upstream);
    upstream.on("data", (chunk) => {
      if (!losing) return client.write(chunk);
      losing = false;
      client.destroy();
    });
  });
  const port = await freePort();
  await new Promise((resolve) => server.listen(port, "127.0.0.1", () => resolve(undefined)));
  return {
    url: `http://127.0.0.1:${port}`,
    loseNextAnswer: () => (losing = true),
    close: () => {
      for (const socket of open) socket.destroy();
      return new Promise((resolve) => server.close(() => resolve(undefined)));
    },
  };
}
