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
export function retrying(fetch: Fetch, { retries, maxDelay, timeout }?: RetryOptions): Fetch;
/**
 * RFC 9110 §10.2.3: delay-seconds or an HTTP date; null when absent or unreadable.
 * @param {string | null} header
 */
export function retryAfter(header: string | null): number | null;
/**
 * @param {number} seconds
 * @param {AbortSignal} [signal]
 * @returns {Promise<void>}
 */
export function sleep(seconds: number, signal?: AbortSignal): Promise<void>;
export type RetryOptions = {
    /**
     * tries after the first (default 5)
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
export type Fetch = (request: Request) => Promise<Response>;
