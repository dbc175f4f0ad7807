import createClient from "openapi-fetch";

import { ApiError } from "./errors.js";
import { retrying, sleep } from "./retry.js";

/** @typedef {import("../types/schema.js").paths} paths */
/** @typedef {import("../types/schema.js").components["schemas"]} Schemas */
/** @typedef {Schemas["Run"]} Run */
/** @typedef {Schemas["Job"]} Job */
/** @typedef {Schemas["JobPut"]} JobPut */
/** @typedef {Schemas["RunSubmit"]} RunSubmit */
/** @typedef {Schemas["BackfillResult"]} BackfillResult */
/** @typedef {NonNullable<paths["/tenants/{tenant_id}/runs"]["get"]["parameters"]["query"]>} RunQuery */
/** @typedef {Schemas["Group"]} Group */
/** @typedef {Schemas["AuditEvent"]} AuditEvent */
/** @typedef {NonNullable<paths["/tenants/{tenant_id}/audit"]["get"]["parameters"]["query"]>} AuditQuery */

/**
 * @typedef {object} ClientOptions
 * @property {string} baseUrl the API's root, e.g. `http://127.0.0.1:8000`
 * @property {string} apiKey a tenant's key (`sch_…`), or the admin token
 * @property {(request: Request) => Promise<Response>} [fetch] default: the global fetch
 * @property {number} [retries] tries after the first of a request that may be tried again (default 5)
 * @property {number} [maxDelay] seconds: the longest wait before a try, a Retry-After's included
 *   (default 30)
 * @property {number} [timeout] seconds: the limit of each try (default 30)
 */

/**
 * @typedef {object} SubmitOptions
 * @property {Date | string} [scheduledAt] when the run is due (default now)
 * @property {string} [idempotencyKey] default: a new UUID, the same for every try of this call
 */

/**
 * @typedef {object} RunFilters
 * @property {RunQuery["status"]} [status]
 * @property {string} [job]
 * @property {Date | string} [scheduledAfter] scheduled_at at or after this
 * @property {Date | string} [scheduledBefore] scheduled_at before this
 * @property {string} [group] a group's id: its runs only
 * @property {number} [pageSize] runs a request asks for (the API's `limit`; default its own)
 */

/**
 * @typedef {object} WaitOptions
 * @property {number} [timeout] seconds (default 60)
 * @property {AbortSignal} [signal]
 */

const ENDED = new Set(["succeeded", "failed", "cancelled"]);

/** A tenant's (or the admin's) view of the API. Every method throws ApiError for a problem. */
export class Client {
  /** @param {ClientOptions} options */
  constructor({ baseUrl, apiKey, fetch = globalThis.fetch, ...retry }) {
    /**
     * Every operation of openapi.json, typed, with this client's key and retries: for what the
     * methods below leave out (tenants, keys, signing secrets, batches, bulk actions).
     * @type {import("openapi-fetch").Client<paths>}
     */
    this.api = createClient({
      baseUrl: baseUrl.replace(/\/+$/, ""),
      headers: { Authorization: `Bearer ${apiKey}` },
      fetch: retrying((request) => fetch(request), retry),
    });
  }

  /**
   * Creates or replaces the job `name`.
   * @param {string} tenant
   * @param {string} name
   * @param {JobPut} fields the job as the API takes it (`target`, `max_attempts`, `schedule`, …)
   * @returns {Promise<Job>}
   */
  async putJob(tenant, name, fields) {
    const path = { tenant_id: tenant, name };
    return ok(await this.api.PUT("/tenants/{tenant_id}/jobs/{name}", { params: { path }, body: fields }));
  }

  /**
   * Submits one run of `job`. Every try carries the same Idempotency-Key, so a submission tried
   * again after a lost answer makes one run.
   * @param {string} tenant
   * @param {string} job
   * @param {unknown} [payload] default: the job's payload
   * @param {SubmitOptions & Omit<RunSubmit, "job" | "payload" | "scheduled_at" | "idempotency_key">} [options]
   *   and the API's other fields (`priority`, `callback`, `depends_on`, `on_parent_failure`,
   *   `pass_results`, `group`)
   * @returns {Promise<Run>}
   */
  async submitRun(tenant, job, payload, { scheduledAt, idempotencyKey, ...fields } = {}) {
    /** @type {RunSubmit} */
    const body = { ...fields, job };
    if (payload !== undefined) body.payload = payload;
    if (scheduledAt !== undefined) body.scheduled_at = isoTime(scheduledAt);
    const header = { "Idempotency-Key": idempotencyKey ?? crypto.randomUUID() };
    const params = { path: { tenant_id: tenant }, header };
    return ok(await this.api.POST("/tenants/{tenant_id}/runs", { params, body }));
  }

  /**
   * @param {string} runId
   * @returns {Promise<Run>}
   */
  async getRun(runId) {
    return ok(await this.api.GET("/runs/{run_id}", { params: { path: { run_id: runId } } }));
  }

  /**
   * The run once it has ended (succeeded, failed or cancelled). Past `timeout`, a DOMException
   * named `TimeoutError`.
   * @param {string} runId
   * @param {WaitOptions} [options]
   * @returns {Promise<Run>}
   */
  async wait(runId, { timeout = 60, signal } = {}) {
    const deadline = Date.now() + timeout * 1000;
    for (let interval = 0.05; ; interval = Math.min(1, interval * 2)) {
      const run = await this.getRun(runId);
      if (ENDED.has(run.status)) return run;
      const left = (deadline - Date.now()) / 1000;
      if (left <= 0) {
        throw new DOMException(`run ${runId} is still ${run.status} after ${timeout} s`, "TimeoutError");
      }
      await sleep(Math.min(interval, left), signal);
    }
  }

  /**
   * Every run of the tenant that matches, newest first, page after page.
   * @param {string} tenant
   * @param {RunFilters} [filters]
   * @returns {AsyncGenerator<Run, void, undefined>}
   */
  async *listRuns(tenant, { status, job, scheduledAfter, scheduledBefore, group, pageSize } = {}) {
    /** @type {RunQuery} */
    const query = { status, job, group, limit: pageSize };
    if (scheduledAfter !== undefined) query.scheduled_after = isoTime(scheduledAfter);
    if (scheduledBefore !== undefined) query.scheduled_before = isoTime(scheduledBefore);
    for (;;) {
      const params = { path: { tenant_id: tenant }, query };
      const page = ok(await this.api.GET("/tenants/{tenant_id}/runs", { params }));
      yield* page.runs;
      if (!page.next_cursor) return;
      query.cursor = page.next_cursor;
    }
  }

  /**
   * A group's progress: its runs counted by status, when it completed and what its completion made.
   * @param {string} tenant
   * @param {string} groupId
   * @returns {Promise<Group>}
   */
  async getGroup(tenant, groupId) {
    const params = { path: { tenant_id: tenant, group_id: groupId } };
    return ok(await this.api.GET("/tenants/{tenant_id}/groups/{group_id}", { params }));
  }

  /**
   * Every group of the tenant, newest first, page after page.
   * @param {string} tenant
   * @param {{ pageSize?: number }} [options]
   * @returns {AsyncGenerator<Group, void, undefined>}
   */
  async *listGroups(tenant, { pageSize } = {}) {
    /** @type {{ limit?: number, cursor?: string }} */
    const query = { limit: pageSize };
    for (;;) {
      const params = { path: { tenant_id: tenant }, query };
      const page = ok(await this.api.GET("/tenants/{tenant_id}/groups", { params }));
      yield* page.groups;
      if (!page.next_cursor) return;
      query.cursor = page.next_cursor;
    }
  }

  /**
   * Submits one run of every job subscribed to the event `name` (its `on_events`), all or none, in
   * job name order: none when no job subscribes. Every try carries the same Idempotency-Key, so a
   * publication tried again after a lost answer makes its runs once.
   * @param {string} tenant
   * @param {string} name
   * @param {unknown} [payload] each run's payload (default: its job's)
   * @param {{ idempotencyKey?: string }} [options] default: a new UUID, the same for every try
   * @returns {Promise<Run[]>}
   */
  async publishEvent(tenant, name, payload, { idempotencyKey } = {}) {
    const header = { "Idempotency-Key": idempotencyKey ?? crypto.randomUUID() };
    const params = { path: { tenant_id: tenant, name }, header };
    const body = payload === undefined ? {} : { payload };
    return ok(await this.api.POST("/tenants/{tenant_id}/events/{name}", { params, body })).runs;
  }

  /**
   * Every change made to the tenant through the API or the dashboard (one action's only, if
   * given), newest first, page after page (docs/audit.md).
   * @param {string} tenant
   * @param {{ action?: AuditEvent["action"], pageSize?: number }} [options]
   * @returns {AsyncGenerator<AuditEvent, void, undefined>}
   */
  async *listAuditEvents(tenant, { action, pageSize } = {}) {
    /** @type {AuditQuery} */
    const query = { action, limit: pageSize };
    for (;;) {
      const params = { path: { tenant_id: tenant }, query };
      const page = ok(await this.api.GET("/tenants/{tenant_id}/audit", { params }));
      yield* page.events;
      if (!page.next_cursor) return;
      query.cursor = page.next_cursor;
    }
  }

  /**
   * Makes the cron job's occurrences in [from, to) into runs, each at most once however often it
   * is asked: `existing` counts those whose run was made already (by the schedule or a backfill).
   * @param {string} tenant
   * @param {string} name
   * @param {Date | string} from the first occurrence included
   * @param {Date | string} to the end, excluded
   * @returns {Promise<BackfillResult>}
   */
  async backfill(tenant, name, from, to) {
    const params = { path: { tenant_id: tenant, name } };
    const body = { from: isoTime(from), to: isoTime(to) };
    return ok(await this.api.POST("/tenants/{tenant_id}/jobs/{name}/backfill", { params, body }));
  }

  /**
   * Cancels a run that has not ended, a running one too (its worker is told to stop); 409 for a
   * finished run.
   * @param {string} runId
   * @returns {Promise<Run>}
   */
  async cancelRun(runId) {
    return ok(await this.api.POST("/runs/{run_id}/cancel", { params: { path: { run_id: runId } } }));
  }

  /**
   * Moves a failed or cancelled run back to pending, due now.
   * @param {string} runId
   * @param {{ maxAttempts?: number }} [options] its new `max_attempts` (default: one more than made)
   * @returns {Promise<Run>}
   */
  async retryRun(runId, { maxAttempts } = {}) {
    const params = { path: { run_id: runId } };
    const body = maxAttempts === undefined ? undefined : { max_attempts: maxAttempts };
    return ok(await this.api.POST("/runs/{run_id}/retry", { params, body }));
  }
}

/**
 * The data of a success, else its problem thrown as an ApiError.
 * @template T
 * @param {{ data?: T, error?: unknown, response: Response }} answer
 * @returns {T}
 */
function ok({ data, error, response }) {
  if (!response.ok || data === undefined) throw ApiError.from(response, error);
  return data;
}

/** @param {Date | string} time */
function isoTime(time) {
  return time instanceof Date ? time.toISOString() : time;
}
