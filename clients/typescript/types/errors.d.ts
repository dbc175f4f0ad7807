/** @typedef {import("../types/schema.js").components["schemas"]["Problem"]} Problem */
/**
 * Every answer of the API that is not a success: its RFC 9457 problem details. Programs switch on
 * `code` (stable: `invalid_input`, `not_found`, `conflict`, `over_quota`, …) and `field` (the input at
 * fault, e.g. `runs[3].scheduled_at`, or null); `detail` is for a person.
 */
export class ApiError extends Error {
    /**
     * The error a failed response carries. An answer that is not problem details (a proxy's HTML
     * page, say) still becomes an ApiError, with code `http_error` and the start of its text.
     * @param {Response} response
     * @param {unknown} body what openapi-fetch read from it: the parsed JSON, or its text
     */
    static from(response: Response, body: unknown): ApiError;
    /**
     * @param {number} status
     * @param {string} code
     * @param {string} detail
     * @param {string | null} [field]
     * @param {string} [title]
     */
    constructor(status: number, code: string, detail: string, field?: string | null, title?: string);
    /** @readonly */
    readonly status: number;
    /** @readonly */
    readonly code: string;
    /** @readonly */
    readonly detail: string;
    /** @readonly */
    readonly field: string | null;
    /** @readonly */
    readonly title: string;
}
export type Problem = import("../types/schema.js").components["schemas"]["Problem"];
