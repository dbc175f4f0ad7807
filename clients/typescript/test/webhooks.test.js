// verifyWebhook on real deliveries: a worker of the stack calls a local receiver, signed with the
// tenant's secrets (during a rotation, with the new secret and the previous one); the body is the
// run's payload, or an envelope when the job asks for one, or a completion callback's envelope.
import assert from "node:assert/strict";
import { after, before, test } from "node:test";

import { verifyWebhook, WebhookVerificationError } from "../src/index.js";
import { newTenant, receiver } from "./support.js";

/** @type {Awaited<ReturnType<typeof receiver>>} */
let hooks;
before(async () => (hooks = await receiver()));
after(() => hooks.close());

const OTHER_SECRET = "whsec_" + Buffer.alloc(32, 7).toString("base64");

/**
 * A tenant whose job calls the receiver; with `overlap`, its secret is rotated (with that overlap)
 * before the first call, so no worker has its secrets cached yet. Returns the first delivery and
 * the secrets.
 * @param {number} [overlap] seconds the previous secret keeps signing; undefined: no rotation
 * @param {"payload" | "envelope"} [body] the target's body
 */
async function delivered(overlap, body = "payload") {
  const { id: tenant, signingSecret, client } = await newTenant("hooks");
  let current = signingSecret;
  if (overlap !== undefined) {
    const { data } = await client.api.POST("/tenants/{tenant_id}/signing-secrets", {
      params: { path: { tenant_id: tenant } },
      body: { overlap_seconds: overlap },
    });
    assert.ok(data);
    current = data.signing_secret;
  }
  await client.putJob(tenant, "hook", { target: { type: "http", url: hooks.url, method: "POST", body } });
  const next = hooks.next();
  const run = await client.submitRun(tenant, "hook", { user: 42 });
  assert.equal((await client.wait(run.id, { timeout: 30 })).status, "succeeded");
  return { run, delivery: await next, first: signingSecret, current };
}

test("a delivery verifies to the run's payload, from Node's headers or a Headers", async () => {
  const { run, delivery, first } = await delivered();
  assert.equal(delivery.headers["webhook-id"], run.id);
  assert.equal(delivery.body.toString("utf8"), '{"user":42}');
  /** @type {{ user: number }} */
  const payload = verifyWebhook(first, delivery.headers, delivery.body);
  assert.deepEqual(payload, { user: 42 });
  const headers = new Headers(/** @type {Record<string, string>} */ (delivery.headers));
  assert.deepEqual(verifyWebhook([first], headers, delivery.body.toString("utf8")), payload);

  const refused = { name: "WebhookVerificationError" };
  assert.throws(() => verifyWebhook(OTHER_SECRET, delivery.headers, delivery.body), refused);
  const altered = Buffer.from(delivery.body.toString("utf8").replace("42", "43"));
  assert.throws(() => verifyWebhook(first, delivery.headers, altered), WebhookVerificationError);
  const stale = { ...delivery.headers, "webhook-timestamp": String(Math.floor(Date.now() / 1000) - 600) };
  assert.throws(() => verifyWebhook(first, stale, delivery.body), refused);
  const otherRun = { ...delivery.headers, "webhook-id": "another-run" };
  assert.throws(() => verifyWebhook(first, otherRun, delivery.body), refused);
  assert.throws(() => verifyWebhook([], delivery.headers, delivery.body), refused);
});

test("a job with an envelope body verifies to the envelope, its attempt and URL signed", async () => {
  const { run, delivery, first } = await delivered(undefined, "envelope");
  /** @type {import("../src/index.js").WebhookEvent} */
  const event = verifyWebhook(first, delivery.headers, delivery.body);
  assert.ok(event.type === "run.attempt");
  assert.equal(event.data.run_id, run.id);
  assert.equal(event.data.attempt, 1);
  assert.equal(event.data.url, hooks.url);
  assert.deepEqual(event.data.payload, { user: 42 });
});

test("during a rotation, either secret verifies, and a list accepts any of them", async () => {
  const { delivery, first, current } = await delivered(3600);
  assert.equal(String(delivery.headers["webhook-signature"]).split(" ").length, 2);
  for (const secrets of [first, current, [OTHER_SECRET, current], [OTHER_SECRET, first]]) {
    assert.ok(verifyWebhook(secrets, delivery.headers, delivery.body));
  }
});

test("a retired secret no longer verifies; the receiver's list of old and new still does", async () => {
  const { delivery, first, current } = await delivered(0);
  assert.equal(String(delivery.headers["webhook-signature"]).split(" ").length, 1);
  assert.throws(() => verifyWebhook(first, delivery.headers, delivery.body), WebhookVerificationError);
  assert.ok(verifyWebhook([first, current], delivery.headers, delivery.body));
});

test("a completion callback verifies, and carries the finished run", async () => {
  const { id: tenant, signingSecret, client } = await newTenant("told");
  await client.putJob(tenant, "quick", { target: { type: "noop" } });
  const next = hooks.next();
  const run = await client.submitRun(tenant, "quick", { n: 1 }, { callback: { url: hooks.url, on: ["succeeded"] } });
  const delivery = await next;
  /** @type {import("../src/index.js").WebhookEvent} */
  const event = verifyWebhook(signingSecret, delivery.headers, delivery.body);
  assert.ok(event.type === "run.completed");
  assert.equal(event.data.id, run.id);
  assert.equal(event.data.status, "succeeded");
});
