// What every test file shares: the stack test/run.js started (or was given), and tenants of their own.
import { randomUUID } from "node:crypto";
import { createServer } from "node:http";

import { ApiError, Client } from "../src/index.js";

const baseUrl = process.env.SCHEDULER_API_URL ?? "";
const adminToken = process.env.SCHEDULER_ADMIN_TOKEN ?? "";
if (!baseUrl || !adminToken) throw new Error("run the tests with `npm test` (test/run.js starts a stack)");

export const admin = new Client({ baseUrl, apiKey: adminToken });
export { baseUrl };

/**
 * @typedef {object} Tenant
 * @property {string} id
 * @property {string} apiKey
 * @property {string} signingSecret
 * @property {Client} client its own client
 */

/**
 * A tenant of this test alone, and a client with its key.
 * @param {string} name
 * @param {Partial<import("../src/client.js").ClientOptions>} [options]
 * @returns {Promise<Tenant>}
 */
export async function newTenant(name, options = {}) {
  const id = `${name}-${randomUUID().slice(0, 8)}`;
  const { data, error, response } = await admin.api.POST("/tenants", { body: { id } });
  if (!data) throw ApiError.from(response, error);
  const client = new Client({ baseUrl, apiKey: data.api_key, ...options });
  return { id, apiKey: data.api_key, signingSecret: data.signing_secret, client };
}

/**
 * A fetch that records each request it sends (a copy, before sending) and each answer's status.
 * @param {(request: Request) => Promise<Response>} [fetch]
 */
export function recording(fetch = globalThis.fetch) {
  /** @typedef {{ method: string, url: string, headers: Headers, status?: number, failed?: unknown }} Sent */
  /** @type {Sent[]} */
  const sent = [];
  /** @param {Request} request */
  const recorder = async (request) => {
    /** @type {Sent} */
    const entry = { method: request.method, url: request.url, headers: new Headers(request.headers) };
    sent.push(entry);
    try {
      const response = await fetch(request);
      entry.status = response.status;
      return response;
    } catch (error) {
      entry.failed = error;
      throw error;
    }
  };
  return { fetch: recorder, sent };
}

/**
 * @typedef {object} Delivery
 * @property {string} url
 * @property {import("node:http").IncomingHttpHeaders} headers
 * @property {Buffer} body the bytes as received
 */

/**
 * A webhook receiver on a free loopback port that keeps every call and answers 200.
 * @returns {Promise<{ url: string, deliveries: Delivery[], next: () => Promise<Delivery>, close: () => Promise<void> }>}
 */
export async function receiver() {
  /** @type {Delivery[]} */
  const deliveries = [];
  /** @type {((delivery: Delivery) => void)[]} */
  const waiting = [];
  const server = createServer((request, response) => {
    /** @type {Buffer[]} */
    const chunks = [];
    request.on("data", (chunk) => chunks.push(chunk));
    request.on("end", () => {
      const delivery = { url: request.url ?? "", headers: request.headers, body: Buffer.concat(chunks) };
      deliveries.push(delivery);
      waiting.shift()?.(delivery);
      response.writeHead(200, { "Content-Type": "application/json" }).end("{}");
    });
  });
  await new Promise((resolve) => server.listen(0, "127.0.0.1", () => resolve(undefined)));
  const address = server.address();
  if (typeof address !== "object" || !address) throw new Error("no address");
  let seen = 0;
  return {
    url: `http://127.0.0.1:${address.port}/hook`,
    deliveries,
    next: () => {
      const delivery = deliveries[seen++];
      return delivery ? Promise.resolve(delivery) : new Promise((resolve) => waiting.push(resolve));
    },
    close: () => new Promise((resolve) => server.close(() => resolve(undefined))),
  };
}
