"""Which database errors a retry can fix (app/db/errors.is_transient)."""

from __future__ import annotations

import asyncpg
from asyncpg.exceptions import _base

from app.db.errors import is_transient


def test_a_server_away_or_busy_is_transient() -> None:
    for exc in (
        asyncpg.exceptions.AdminShutdownError("x"),
        asyncpg.exceptions.CannotConnectNowError("x"),
        asyncpg.exceptions.SerializationError("x"),
        asyncpg.exceptions.DeadlockDetectedError("x"),
        asyncpg.exceptions.TooManyConnectionsError("x"),
        asyncpg.exceptions.QueryCanceledError("x"),
        asyncpg.exceptions.ConnectionDoesNotExistError("x"),
        asyncpg.InternalClientError("x"),
        ConnectionRefusedError(),
        # A failover: the old primary is now a standby, or no host of the URL is the primary yet.
        asyncpg.exceptions.ReadOnlySQLTransactionError("cannot execute INSERT in a read-only transaction"),
        asyncpg.exceptions.TargetServerAttributeNotMatched("None of the hosts match"),
        TimeoutError(),
        # A migration changed a table under a statement prepared in a transaction: prepared again.
        asyncpg.InvalidCachedStatementError("cached statement plan is invalid"),
    ):
        assert is_transient(exc), exc


def test_a_value_refused_is_not() -> None:
    for exc in (
        asyncpg.exceptions.CharacterNotInRepertoireError("NUL"),
        asyncpg.exceptions.UntranslatableCharacterError("x"),
        asyncpg.exceptions.DataError("invalid input for query argument"),
        _base.DataError("the driver cannot encode a lone surrogate"),
        asyncpg.exceptions.UndefinedColumnError("x"),
        asyncpg.exceptions.InvalidTransactionStateError("another 25xxx: a bug, not an outage"),
        ValueError("x"),
        asyncpg.exceptions.FeatureNotSupportedError("another 0A000: a statement the server never runs"),
    ):
        assert not is_transient(exc), exc
