/** A tenant's (or the admin's) view of the API. Every method throws ApiError for a problem. */
export class Client {
    /** @param {ClientOptions} options */
    constructor({ baseUrl, apiKey, fetch, ...retry }: ClientOptions);
    /**
     * Every operation of openapi.json, typed, with this client's key and retries: for what the
     * methods below leave out (tenants, keys, signing secrets, batches, bulk actions).
     * @type {import("openapi-fetch").Client<paths>}
     */
    api: import("openapi-fetch").Client<paths>;
    /**
     * Creates or replaces the job `name`.
     * @param {string} tenant
     * @param {string} name
     * @param {JobPut} fields the job as the API takes it (`target`, `max_attempts`, `schedule`, …)
     * @returns {Promise<Job>}
     */
    putJob(tenant: string, name: string, fields: JobPut): Promise<Job>;
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
    submitRun(tenant: string, job: string, payload?: unknown, { scheduledAt, idempotencyKey, ...fields }?: SubmitOptions & Omit<RunSubmit, "job" | "payload" | "scheduled_at" | "idempotency_key">): Promise<Run>;
    /**
     * @param {string} runId
     * @returns {Promise<Run>}
     */
    getRun(runId: string): Promise<Run>;
    /**
     * The run once it has ended (succeeded, failed or cancelled). Past `timeout`, a DOMException
     * named `TimeoutError`.
     * @param {string} runId
     * @param {WaitOptions} [options]
     * @returns {Promise<Run>}
     */
    wait(runId: string, { timeout, signal }?: WaitOptions): Promise<Run>;
    /**
     * Every run of the tenant that matches, newest first, page after page.
     * @param {string} tenant
     * @param {RunFilters} [filters]
     * @returns {AsyncGenerator<Run, void, undefined>}
     */
    listRuns(tenant: string, { status, job, scheduledAfter, scheduledBefore, group, pageSize }?: RunFilters): AsyncGenerator<Run, void, undefined>;
    /**
     * A group's progress: its runs counted by status, when it completed and what its completion made.
     * @param {string} tenant
     * @param {string} groupId
     * @returns {Promise<Group>}
     */
    getGroup(tenant: string, groupId: string): Promise<Group>;
    /**
     * Every group of the tenant, newest first, page after page.
     * @param {string} tenant
     * @param {{ pageSize?: number }} [options]
     * @returns {AsyncGenerator<Group, void, undefined>}
     */
    listGroups(tenant: string, { pageSize }?: {
        pageSize?: number;
    }): AsyncGenerator<Group, void, undefined>;
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
    publishEvent(tenant: string, name: string, payload?: unknown, { idempotencyKey }?: {
        idempotencyKey?: string;
    }): Promise<Run[]>;
    /**
     * Every change made to the tenant through the API or the dashboard (one action's only, if
     * given), newest first, page after page (docs/audit.md).
     * @param {string} tenant
     * @param {{ action?: AuditEvent["action"], pageSize?: number }} [options]
     * @returns {AsyncGenerator<AuditEvent, void, undefined>}
     */
    listAuditEvents(tenant: string, { action, pageSize }?: {
        action?: AuditEvent["action"];
        pageSize?: number;
    }): AsyncGenerator<AuditEvent, void, undefined>;
    /**
     * Makes the cron job's occurrences in [from, to) into runs, each at most once however often it
     * is asked: `existing` counts those whose run was made already (by the schedule or a backfill).
     * @param {string} tenant
     * @param {string} name
     * @param {Date | string} from the first occurrence included
     * @param {Date | string} to the end, excluded
     * @returns {Promise<BackfillResult>}
     */
    backfill(tenant: string, name: string, from: Date | string, to: Date | string): Promise<BackfillResult>;
    /**
     * Cancels a run that has not ended, a running one too (its worker is told to stop); 409 for a
     * finished run.
     * @param {string} runId
     * @returns {Promise<Run>}
     */
    cancelRun(runId: string): Promise<Run>;
    /**
     * Moves a failed or cancelled run back to pending, due now.
     * @param {string} runId
     * @param {{ maxAttempts?: number }} [options] its new `max_attempts` (default: one more than made)
     * @returns {Promise<Run>}
     */
    retryRun(runId: string, { maxAttempts }?: {
        maxAttempts?: number;
    }): Promise<Run>;
}
export type paths = import("../types/schema.js").paths;
export type Schemas = import("../types/schema.js").components["schemas"];
export type Run = Schemas["Run"];
export type Job = Schemas["Job"];
export type JobPut = Schemas["JobPut"];
export type RunSubmit = Schemas["RunSubmit"];
export type BackfillResult = Schemas["BackfillResult"];
export type RunQuery = NonNullable<paths["/tenants/{tenant_id}/runs"]["get"]["parameters"]["query"]>;
export type Group = Schemas["Group"];
export type AuditEvent = Schemas["AuditEvent"];
export type AuditQuery = NonNullable<paths["/tenants/{tenant_id}/audit"]["get"]["parameters"]["query"]>;
export type ClientOptions = {
    /**
     * the API's root, e.g. `http://127.0.0.1:8000`
     */
    baseUrl: string;
    /**
     * a tenant's key (`sch_…`), or the admin token
     */
    apiKey: string;
    /**
     * default: the global fetch
     */
    fetch?: ((request: Request) => Promise<Response>) | undefined;
    /**
     * tries after the first of a request that may be tried again (default 5)
     */
    retries?: number | undefined;
    /**
     * seconds: the longest wait before a try, a Retry-After's included
     * (default 30)
     */
    maxDelay?: number | undefined;
    /**
     * seconds: the limit of each try (default 30)
     */
    timeout?: number | undefined;
};
export type SubmitOptions = {
    /**
     * when the run is due (default now)
     */
    scheduledAt?: string | Date | undefined;
    /**
     * default: a new UUID, the same for every try of this call
     */
    idempotencyKey?: string | undefined;
};
export type RunFilters = {
    status?: RunQuery["status"];
    job?: string | undefined;
    /**
     * scheduled_at at or after this
     */
    scheduledAfter?: string | Date | undefined;
    /**
     * scheduled_at before this
     */
    scheduledBefore?: string | Date | undefined;
    /**
     * a group's id: its runs only
     */
    group?: string | undefined;
    /**
     * runs a request asks for (the API's `limit`; default its own)
     */
    pageSize?: number | undefined;
};
export type WaitOptions = {
    /**
     * seconds (default 60)
     */
    timeout?: number | undefined;
    signal?: AbortSignal | undefined;
};
