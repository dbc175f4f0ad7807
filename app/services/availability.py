"""Whether a request failed because the database is away — restarting, failing over, or no server is
the primary yet — rather than because of the request or a bug: the API answers the first with 503
and `Retry-After`, never 500."""

from __future__ import annotations

from app.db.errors import DB_ERRORS, is_transient

# The exception classes a database call may raise; the API routes each to database_away().
DATABASE_ERRORS: tuple[type[Exception], ...] = DB_ERRORS
# A failover (Patroni's leader key lapsing) takes up to tens of seconds, a switchover a few: a client
# that retries this often finds the new primary soon after it is there.
RETRY_AFTER_SECONDS = 2


def database_away(exc: BaseException) -> bool:
    """Trying the same request again later may succeed (app.db.errors.is_transient)."""
    return isinstance(exc, DATABASE_ERRORS) and is_transient(exc)
