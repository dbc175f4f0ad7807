// The client's methods against a live stack: submit, read, wait, list across pages, cancel, retry,
// and the API's problems as ApiError.
import assert from "node:assert/strict";
import { randomUUID } from "node:crypto";
import { describe, test } from "node:test";

import { ApiError } from "../src/index.js";
import { newTenant, recording } from "./support.js";

const HOUR = 3600_000;

describe("runs", async () => {
  const observed = recording();
  const { id: tenant, client } = await newTenant("runs", { fetch: observed.fetch });
  await client.putJob(tenant, "hello", { target: { type: "noop" }, max_attempts: 2 });

  test("submit, get and wait for a run to succeed", async () => {
    const run = await client.submitRun(tenant, "hello", { user: 42 });
    assert.equal(run.job, "hello");
    assert.deepEqual(run.payload, { user: 42 });
    // A key was made for the submission (tries of the same call would all carry it).
    assert.match(run.idempotency_key ?? "", /^[0-9a-f-]{36}$/);
    assert.equal((await client.getRun(run.id)).id, run.id);
    const done = await client.wait(run.id, { timeout: 30 });
    assert.equal(done.status, "succeeded");
    assert.equal(done.attempt, 1);
  });

  test("the same idempotency key answers the same run", async () => {
    const key = `report-${randomUUID()}`;
    const first = await client.submitRun(tenant, "hello", { n: 1 }, { idempotencyKey: key });
    const again = await client.submitRun(tenant, "hello", { n: 1 }, { idempotencyKey: key });
    assert.equal(again.id, first.id);
    assert.equal(first.idempotency_key, key);
  });

  test("cancel a run ahead, retry it, wait; wait's timeout", async () => {
    const later = new Date(Date.now() + HOUR);
    const run = await client.submitRun(tenant, "hello", undefined, { scheduledAt: later, priority: 3 });
    assert.equal(run.status, "pending");
    assert.equal(run.priority, 3);
    assert.equal(Date.parse(run.scheduled_at), later.getTime());
    await assert.rejects(client.wait(run.id, { timeout: 0.3 }), { name: "TimeoutError" });
    assert.equal((await client.cancelRun(run.id)).status, "cancelled");
    const retried = await client.retryRun(run.id, { maxAttempts: 3 });
    assert.equal(retried.status, "pending");
    assert.equal(retried.max_attempts, 3);
    assert.equal((await client.wait(run.id, { timeout: 30 })).status, "succeeded");
  });

  test("list every run across pages, with filters", async () => {
    await client.putJob(tenant, "paged", { target: { type: "noop" } });
    const later = new Date(Date.now() + HOUR);
    const submitted = [];
    for (let i = 0; i < 7; i++) {
      submitted.push((await client.submitRun(tenant, "paged", { i }, { scheduledAt: later })).id);
    }
    const before = observed.sent.length;
    const listed = [];
    for await (const run of client.listRuns(tenant, { job: "paged", status: "pending", pageSize: 3 })) {
      listed.push(run.id);
    }
    assert.deepEqual(listed.toSorted(), submitted.toSorted());
    const pages = observed.sent.slice(before);
    assert.equal(pages.length, 3); // 3 + 3 + 1
    assert.ok(pages.slice(1).every((page) => new URL(page.url).searchParams.has("cursor")));

    const none = [];
    for await (const run of client.listRuns(tenant, { job: "paged", scheduledBefore: new Date() })) {
      none.push(run);
    }
    assert.deepEqual(none, []);
    const ahead = [];
    for await (const run of client.listRuns(tenant, { job: "paged", scheduledAfter: later })) {
      ahead.push(run.id);
    }
    assert.equal(ahead.length, 7);
    for (const id of submitted) await client.cancelRun(id);
  });
});

describe("problems", async () => {
  const { id: tenant, client } = await newTenant("problems");
  const other = await newTenant("other");

  test("422 names the field", async () => {
    await assert.rejects(client.submitRun(tenant, "no-such-job"), (error) => {
      assert.ok(error instanceof ApiError);
      assert.equal(error.status, 422);
      assert.equal(error.code, "invalid_input");
      assert.equal(error.field, "job");
      assert.ok(error.detail.length > 0);
      return true;
    });
    const badUrl = { type: /** @type {const} */ ("http"), url: "ftp://example.com/x", method: /** @type {const} */ ("POST") };
    await assert.rejects(client.putJob(tenant, "bad", { target: badUrl }), (error) => {
      assert.ok(error instanceof ApiError);
      assert.equal(error.status, 422);
      assert.match(error.field ?? "", /^target/);
      return true;
    });
  });

  test("404 for what does not exist or is another tenant's", async () => {
    await assert.rejects(client.getRun(randomUUID()), { name: "ApiError", status: 404, code: "not_found" });
    await other.client.putJob(other.id, "theirs", { target: { type: "noop" } });
    const theirs = await other.client.submitRun(other.id, "theirs");
    await assert.rejects(client.getRun(theirs.id), { status: 404, code: "not_found" });
    await assert.rejects(client.cancelRun(theirs.id), { status: 404, code: "not_found" });
  });

  test("backfill makes a cron job's occurrences into runs once", async () => {
    await client.putJob(tenant, "hourly", { target: { type: "noop" }, schedule: "0 * * * *" });
    const start = new Date(Date.now() + 48 * HOUR);
    start.setUTCHours(0, 0, 0, 0);
    const end = new Date(start.getTime() + 3 * HOUR);
    const made = await client.backfill(tenant, "hourly", start, end);
    assert.deepEqual(made.runs.map((run) => Date.parse(run.scheduled_at)), [0, 1, 2].map((h) => start.getTime() + h * HOUR));
    assert.equal(made.existing, 0);
    const again = await client.backfill(tenant, "hourly", start.toISOString(), end);
    assert.deepEqual([again.runs, again.existing], [[], 3]);
    await client.putJob(tenant, "once", { target: { type: "noop" } });
    await assert.rejects(client.backfill(tenant, "once", start, end), { status: 409, code: "conflict" });
  });

  test("the audit log, newest first across pages, one action's", async () => {
    await client.putJob(tenant, "audited", { target: { type: "noop" } });
    await client.putJob(tenant, "audited", { target: { type: "noop" }, priority: 1 });
    const events = [];
    for await (const event of client.listAuditEvents(tenant, { pageSize: 1 })) events.push(event);
    assert.deepEqual(
      events.slice(0, 2).map((e) => [e.action, e.target, e.actor.type, e.detail]),
      [["job.put", "job:audited", "key", { created: false }], ["job.put", "job:audited", "key", { created: true }]],
    );
    assert.equal(events.at(-1)?.action, "tenant.created");
    const created = [];
    for await (const event of client.listAuditEvents(tenant, { action: "tenant.created" })) created.push(event);
    assert.deepEqual(created.map((e) => e.actor), [{ type: "admin", id: "admin", key_id: null }]);
  });

  test("409 for a run that cannot be cancelled", async () => {
    await client.putJob(tenant, "quick", { target: { type: "noop" } });
    const run = await client.wait((await client.submitRun(tenant, "quick")).id);
    await assert.rejects(client.cancelRun(run.id), { status: 409, code: "conflict" });
  });
});
