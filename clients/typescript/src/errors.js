/** @typedef {import("../types/schema.js").components["schemas"]["Problem"]} Problem */

/**
 * Every answer of the API that is not a success: its RFC 9457 problem details. Programs switch on
 * `code` (stable: `invalid_input`, `not_found`, `conflict`, `over_quota`, …) and `field` (the input at
 * fault, e.g. `runs[3].scheduled_at`, or null); `detail` is for a person.
 */
export class ApiError extends Error {
  /**
   * @param {number} status
   * @param {string} code
   * @param {string} detail
   * @param {string | null} [field]
   * @param {string} [title]
   */
  constructor(status, code, detail, field = null, title = "") {
    super(`${status} ${code}${field ? ` (${field})` : ""}: ${detail}`);
    this.name = "ApiError";
    /** @readonly */
    this.status = status;
    /** @readonly */
    this.code = code;
    /** @readonly */
    this.detail = detail;
    /** @readonly */
    this.field = field;
    /** @readonly */
    this.title = title;
  }

  /**
   * The error a failed response carries. An answer that is not problem details (a proxy's HTML
   * page, say) still becomes an ApiError, with code `http_error` and the start of its text.
   * @param {Response} response
   * @param {unknown} body what openapi-fetch read from it: the parsed JSON, or its text
   */
  static from(response, body) {
    if (isProblem(body)) {
      return new ApiError(body.status, body.code, body.detail, body.field ?? null, body.title);
    }
    const text = typeof body === "string" ? body : JSON.stringify(body ?? "");
    return new ApiError(response.status, "http_error", text.slice(0, 500) || response.statusText);
  }
}

/**
 * @param {unknown} body
 * @returns {body is Problem}
 */
function isProblem(body) {
  if (typeof body !== "object" || body === null) return false;
  const { status, code, detail } = /** @type {Record<string, unknown>} */ (body);
  return typeof status === "number" && typeof code === "string" && typeof detail === "string";
}
