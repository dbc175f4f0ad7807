"""Which database errors are worth waiting out, and which will fail the same way every time."""

from __future__ import annotations

import asyncpg

# What an unreachable or restarting database raises. A connection that dies under the pool's reset
# raises asyncpg's InternalClientError, which is neither a PostgresError nor an InterfaceError.
DB_ERRORS = (
    OSError,
    TimeoutError,
    asyncpg.PostgresError,
    asyncpg.InterfaceError,
    asyncpg.InternalClientError,
)
# SQLSTATE classes of a server that is away, busy or was told to stop: connection exception,
# transaction rollback (serialization, deadlock), insufficient resources, lock not available,
# operator intervention (shutdown 57P01, cannot connect now 57P03, cancel), system error.
_TRANSIENT_CLASSES = {"08", "40", "53", "55", "57", "58"}
# A write on a server that is (or just became) a standby: read_only_sql_transaction. Every statement
# the scheduler runs may write, so this means the connection reached a server that is no longer the
# primary (a failover, a switchover): the primary is elsewhere, and a new connection finds it.
_TRANSIENT_STATES = {"25006"}


def is_transient(exc: BaseException) -> bool:
    """True when trying the same statement again later may succeed: the server is away, restarting,
    or no longer the primary (and no host of a multi-host URL is yet: asyncpg's
    TargetServerAttributeNotMatched, an InternalClientError). A value Postgres refuses (a NUL
    in text), or one the driver cannot encode (its client-side DataError), fails the same way forever:
    retrying that write jammed every outcome queued behind it."""
    if isinstance(exc, asyncpg.InvalidCachedStatementError):
        # A migration changed a table under a prepared statement (a column added to a row that
        # `RETURNING *` returns): asyncpg prepares it again on the next try. Inside a transaction
        # it cannot do so by itself.
        return True
    if isinstance(exc, asyncpg.PostgresError):
        sqlstate = getattr(exc, "sqlstate", None) or ""
        return sqlstate[:2] in _TRANSIENT_CLASSES or sqlstate in _TRANSIENT_STATES
    if isinstance(exc, ValueError):  # the driver's own DataError: an argument it cannot encode
        return False
    return isinstance(exc, (OSError, TimeoutError, asyncpg.InterfaceError, asyncpg.InternalClientError))
