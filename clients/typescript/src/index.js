/**
 * The scheduler's TypeScript client: `new Client({ baseUrl, apiKey })`, its problems as ApiError,
 * and `verifyWebhook` for the calls it makes.
 * @module
 */
export { Client } from "./client.js";
export { ApiError } from "./errors.js";
export { verifyWebhook, WebhookVerificationError } from "./webhooks.js";

/** @typedef {import("./client.js").ClientOptions} ClientOptions */
/** @typedef {import("./client.js").RunFilters} RunFilters */
/** @typedef {import("./client.js").Run} Run */
/** @typedef {import("./client.js").Job} Job */
/** @typedef {import("./client.js").Group} Group */
/** @typedef {import("./client.js").JobPut} JobPut */
/** @typedef {import("./webhooks.js").WebhookEvent} WebhookEvent */
/** @typedef {import("../types/schema.js").paths} paths */
/** @typedef {import("../types/schema.js").components} components */
