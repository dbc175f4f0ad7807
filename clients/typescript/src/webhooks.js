import { Webhook, WebhookVerificationError } from "standardwebhooks";

export { WebhookVerificationError };

/**
 * @typedef {Headers | Record<string, string | string[] | undefined>} WebhookHeaders a fetch
 *   `Headers`, or a record such as Node's `request.headers`
 */

/**
 * `data` of an attempt's envelope, the body of an `http` target with `"body": "envelope"`
 * (docs/webhooks.md).
 * @typedef {object} AttemptCall
 * @property {string} run_id
 * @property {string} tenant_id
 * @property {string} job
 * @property {number} attempt
 * @property {number} epoch a delivery is (run_id, epoch); a lower epoch than one seen is stale
 * @property {string} method the target's, as the job names it
 * @property {string} url the target's, as the job names it: check it is yours
 * @property {unknown} payload the run's
 */

/**
 * The envelopes a signed call's body may be: an attempt of an `http` target with
 * `"body": "envelope"`, or a completion callback carrying the finished run as GET /runs/{id}
 * answers it. An `http` target's default body is the run's payload itself, not one of these.
 * @typedef {{ type: "run.attempt", timestamp: string, data: AttemptCall }
 *   | { type: "run.completed", timestamp: string, data: import("./client.js").Run }} WebhookEvent
 */

/**
 * The parsed JSON body of a call the scheduler signed (Standard Webhooks: `webhook-id`,
 * `webhook-timestamp` within 5 minutes, `webhook-signature`) with any of `secrets`: during a
 * rotation, the new secret and the one it replaces. Throws WebhookVerificationError otherwise.
 * The body is whatever was sent: an `http` target's run payload (by default), its envelope
 * (`"body": "envelope"`) or a completion callback's (both a `WebhookEvent`). `T` names what the
 * caller expects (`unknown` unless given): it is not checked. Pass the body exactly as received,
 * before any JSON parsing: its bytes are what is signed.
 * @template [T=unknown]
 * @param {string | string[]} secrets `whsec_…`
 * @param {WebhookHeaders} headers
 * @param {string | Uint8Array} body
 * @returns {T}
 */
export function verifyWebhook(secrets, headers, body) {
  const flat = flatHeaders(headers);
  const all = typeof secrets === "string" ? [secrets] : secrets;
  if (all.length === 0) throw new WebhookVerificationError("no secret to verify with");
  /** @type {unknown} */
  let refusal;
  for (const secret of all) {
    try {
      return /** @type {T} */ (new Webhook(secret).verify(body, flat));
    } catch (error) {
      if (!(error instanceof WebhookVerificationError)) throw error;
      refusal = error;
    }
  }
  throw refusal;
}

/**
 * Node gives a header sent twice as an array: the signatures of both are candidates, space-separated
 * as the spec puts several; a repeated id or timestamp then fails to verify, as it should.
 * @param {WebhookHeaders} headers
 * @returns {Record<string, string>}
 */
function flatHeaders(headers) {
  /** @type {Record<string, string>} */
  const flat = {};
  const entries = headers instanceof Headers ? headers.entries() : Object.entries(headers);
  for (const [name, value] of entries) {
    if (value !== undefined) flat[name.toLowerCase()] = Array.isArray(value) ? value.join(" ") : value;
  }
  return flat;
}
