// Dependencies, groups and events through the client against a live stack: a run held by its
// parent, a batch's group read back and its runs listed, an event's runs made once per key.
import assert from "node:assert/strict";
import { randomUUID } from "node:crypto";
import { describe, test } from "node:test";

import { newTenant, recording } from "./support.js";

const HOUR = 3600_000;

describe("dependencies, groups and events", async () => {
  const observed = recording();
  const { id: tenant, client } = await newTenant("groups", { fetch: observed.fetch });
  await client.putJob(tenant, "step", { target: { type: "noop" } });
  await client.putJob(tenant, "report", { target: { type: "noop" }, payload: { d: 1 }, on_events: ["order.placed"] });

  test("a dependent is held until its parent ends, and follows it", async () => {
    const parent = await client.submitRun(tenant, "step", undefined, { scheduledAt: new Date(Date.now() + HOUR) });
    const child = await client.submitRun(tenant, "step", { n: 1 }, { depends_on: [parent.id], pass_results: true });
    const runner = await client.submitRun(tenant, "step", { n: 2 }, { depends_on: [parent.id], on_parent_failure: "run" });
    assert.deepEqual([child.held, child.depends_on], ["dependencies", [parent.id]]);
    assert.equal(runner.held, "dependencies");
    await client.cancelRun(parent.id);
    assert.equal((await client.wait(child.id, { timeout: 30 })).status, "cancelled");
    assert.equal((await client.wait(runner.id, { timeout: 30 })).status, "succeeded");
  });

  test("a batch's group, read back and listed; its runs by group; one joined later", async () => {
    // The run an hour ahead keeps the group open for the one that joins it.
    const later = new Date(Date.now() + HOUR).toISOString();
    const { data: batch } = await client.api.POST("/tenants/{tenant_id}/runs/batch", {
      params: { path: { tenant_id: tenant } },
      body: {
        runs: [{ job: "step", scheduled_at: later }, { job: "step" }],
        group: { name: "nightly", on_complete: { job: "report" } },
      },
    });
    assert.ok(batch?.group_id);
    const joined = await client.submitRun(tenant, "step", undefined, { group: { id: batch.group_id } });
    assert.equal(joined.group_id, batch.group_id);
    assert.equal((await client.getGroup(tenant, batch.group_id)).completed_at, null);
    await client.cancelRun(batch.runs[0].id);
    for (const run of [...batch.runs, joined]) await client.wait(run.id, { timeout: 30 });
    const group = await client.getGroup(tenant, batch.group_id);
    assert.deepEqual([group.name, group.total, group.succeeded, group.cancelled, group.pending], ["nightly", 3, 2, 1, 0]);
    assert.ok(group.completed_at);
    const listed = [];
    for await (const run of client.listRuns(tenant, { group: batch.group_id, pageSize: 2 })) listed.push(run.id);
    assert.deepEqual(listed.toSorted(), [...batch.runs, joined].map((run) => run.id).toSorted());
    const groups = [];
    for await (const each of client.listGroups(tenant, { pageSize: 1 })) groups.push(each.id);
    assert.ok(groups.includes(batch.group_id));
    await assert.rejects(client.getGroup(tenant, randomUUID()), { name: "ApiError", status: 404, code: "not_found" });
  });

  test("an event makes a run of each subscribed job, once per key", async () => {
    const before = observed.sent.length;
    const runs = await client.publishEvent(tenant, "order.placed", { order: 7 });
    assert.deepEqual(runs.map((run) => [run.job, run.payload]), [["report", { order: 7 }]]);
    // The key was made for the call; sent again, it answers the same runs.
    const key = observed.sent[before].headers.get("Idempotency-Key");
    assert.match(key ?? "", /^[0-9a-f-]{36}$/);
    const again = await client.publishEvent(tenant, "order.placed", { order: 7 }, { idempotencyKey: key ?? "" });
    assert.deepEqual(again.map((run) => run.id), runs.map((run) => run.id));
    const defaulted = await client.publishEvent(tenant, "order.placed");
    assert.deepEqual(defaulted.map((run) => run.payload), [{ d: 1 }]); // the job's own
    assert.deepEqual(await client.publishEvent(tenant, "nobody.listens"), []);
    await assert.rejects(client.publishEvent(tenant, "not a name"), { status: 422, field: "name" });
  });
});
