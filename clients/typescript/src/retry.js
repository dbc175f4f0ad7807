/**
 * @typedef {object} RetryOptions
 * @property {number} [retries] tries after the first (default 5)
 * @property {number} [maxDelay] seconds: the longest wait before a try, a Retry-After's included
 *   (default 30)
 * @property {number} [timeout] seconds: the limit of each try (default 30)
 */

/** @typedef {(request: Request) => Promise<Response>} Fetch */

// What the server answers when it wrote nothing and asks to be asked again (over quota, the
// database away for a moment), each with a Retry-After.
const RETRIED_STATUSES = new Set([429, 503]);
// A request sent twice does what it does once: safe to send again when its answer was lost.
const REPEATABLE_METHODS = new Set(["GET", "HEAD", "OPTIONS", "PUT", "DELETE"]);

/**
 * A fetch that tries a request again on 429 and 503, after the Retry-After they carry, and, when the
 * request can be sent twice (a repeatable method, or an `Idempotency-Key` that makes the server
 * answer a repeated submission with the run it made), after a lost connection or a try's timeout.
 * A submission whose first try is still being committed answers 409 on `idempotency_key`: that
 * is tried again too. Every try sends the request as it was, headers included.
 * @param {Fetch} fetch
 * @param {RetryOptions} [options]
 * @returns {Fetch}
 */
export function retrying(fetch, { retries = 5, maxDelay = 30, timeout = 30 } = {}) {
  return async (request) => {
    const idempotent = request.headers.has("Idempotency-Key");
    const repeatable = idempotent || REPEATABLE_METHODS.has(request.method);
    for (let attempt = 0; ; attempt++) {
      const last = attempt >= retries;
      /** @type {Response} */
      let response;
      try {
        response = await fetch(withTimeout(request.clone(), timeout));
      } catch (error) {
        if (last || !repeatable || request.signal.aborted || !isConnectionError(error)) throw error;
        await sleep(backoff(attempt, maxDelay), request.signal);
        continue;
      }
      const delay = last ? null : await retryDelay(response, idempotent, attempt, maxDelay);
      if (delay === null) return response;
      await response.body?.cancel();
      await sleep(delay, request.signal);
    }
  };
}

/**
 * Seconds to wait before trying again, or null when this answer is the one to return.
 * @param {Response} response
 * @param {boolean} idempotent
 * @param {number} attempt
 * @param {number} maxDelay
 */
async function retryDelay(response, idempotent, attempt, maxDelay) {
  if (RETRIED_STATUSES.has(response.status)) {
    const asked = retryAfter(response.headers.get("Retry-After"));
    return asked === null ? backoff(attempt, maxDelay) : Math.min(asked, maxDelay);
  }
  if (response.status === 409 && idempotent) {
    const problem = /** @type {{ field?: unknown } | null} */ (
      await response.clone().json().catch(() => null)
    );
    if (problem?.field === "idempotency_key") return backoff(attempt, maxDelay);
  }
  return null;
}

/**
 * RFC 9110 §10.2.3: delay-seconds or an HTTP date; null when absent or unreadable.
 * @param {string | null} header
 */
export function retryAfter(header) {
  if (header === null) return null;
  const value = header.trim();
  if (/^\d+$/.test(value)) return Number(value);
  const at = Date.parse(value);
  return Number.isNaN(at) ? null : Math.max(0, (at - Date.now()) / 1000);
}

/**
 * Exponential from a quarter second, jittered so that clients cut off together do not come back
 * together.
 * @param {number} attempt
 * @param {number} maxDelay
 */
function backoff(attempt, maxDelay) {
  return Math.min(maxDelay, 0.25 * 2 ** attempt) * (0.5 + Math.random() / 2);
}

/**
 * fetch fails with a TypeError when the connection cannot be made or is lost, and with a
 * TimeoutError when a try's own limit passed; anything else (the caller's abort) is not retried.
 * @param {unknown} error
 */
function isConnectionError(error) {
  return error instanceof TypeError || (error instanceof Error && error.name === "TimeoutError");
}

/**
 * @param {Request} request
 * @param {number} seconds
 */
function withTimeout(request, seconds) {
  const signal = AbortSignal.any([request.signal, AbortSignal.timeout(seconds * 1000)]);
  return new Request(request, { signal });
}

/**
 * @param {number} seconds
 * @param {AbortSignal} [signal]
 * @returns {Promise<void>}
 */
export function sleep(seconds, signal) {
  return new Promise((resolve, reject) => {
    if (signal?.aborted) return reject(signal.reason);
    const onAbort = () => {
      clearTimeout(timer);
      reject(signal?.reason);
    };
    const timer = setTimeout(() => {
      signal?.removeEventListener("abort", onAbort);
      resolve();
    }, seconds * 1000);
    signal?.addEventListener("abort", onAbort, { once: true });
  });
}
