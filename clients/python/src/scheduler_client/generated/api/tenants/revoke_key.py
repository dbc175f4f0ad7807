from http import HTTPStatus
from typing import Any, cast
from urllib.parse import quote

import httpx

from ...client import AuthenticatedClient, Client
from ...types import Response, UNSET
from ... import errors

from ...models.problem import Problem
from typing import cast
from uuid import UUID


def _get_kwargs(
    tenant_id: str,
    key_id: UUID,
) -> dict[str, Any]:

    _kwargs: dict[str, Any] = {
        "method": "delete",
        "url": "/tenants/{tenant_id}/keys/{key_id}".format(
            tenant_id=quote(str(tenant_id), safe=""),
            key_id=quote(str(key_id), safe=""),
        ),
    }

    return _kwargs


def _parse_response(
    *, client: AuthenticatedClient | Client, response: httpx.Response
) -> Any | Problem | None:
    if response.status_code == 204:
        response_204 = cast(Any, None)
        return response_204

    if response.status_code == 401:
        response_401 = Problem.from_dict(response.json())

        return response_401

    if response.status_code == 403:
        response_403 = Problem.from_dict(response.json())

        return response_403

    if response.status_code == 404:
        response_404 = Problem.from_dict(response.json())

        return response_404

    if response.status_code == 409:
        response_409 = Problem.from_dict(response.json())

        return response_409

    if response.status_code == 422:
        response_422 = Problem.from_dict(response.json())

        return response_422

    if client.raise_on_unexpected_status:
        raise errors.UnexpectedStatus(response.status_code, response.content)
    else:
        return None


def _build_response(
    *, client: AuthenticatedClient | Client, response: httpx.Response
) -> Response[Any | Problem]:
    return Response(
        status_code=HTTPStatus(response.status_code),
        content=response.content,
        headers=response.headers,
        parsed=_parse_response(client=client, response=response),
    )


def sync_detailed(
    tenant_id: str,
    key_id: UUID,
    *,
    client: AuthenticatedClient,
) -> Response[Any | Problem]:
    """Revoke Key

     Revoke a key, the one making the request included. It stops working on this API process at
    once and on every other within seconds (their key caches' TTL). Revoking again is a no-op.

    Args:
        tenant_id (str):
        key_id (UUID):

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        Response[Any | Problem]
    """

    kwargs = _get_kwargs(
        tenant_id=tenant_id,
        key_id=key_id,
    )

    response = client.get_httpx_client().request(
        **kwargs,
    )

    return _build_response(client=client, response=response)


def sync(
    tenant_id: str,
    key_id: UUID,
    *,
    client: AuthenticatedClient,
) -> Any | Problem | None:
    """Revoke Key

     Revoke a key, the one making the request included. It stops working on this API process at
    once and on every other within seconds (their key caches' TTL). Revoking again is a no-op.

    Args:
        tenant_id (str):
        key_id (UUID):

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        Any | Problem
    """

    return sync_detailed(
        tenant_id=tenant_id,
        key_id=key_id,
        client=client,
    ).parsed


async def asyncio_detailed(
    tenant_id: str,
    key_id: UUID,
    *,
    client: AuthenticatedClient,
) -> Response[Any | Problem]:
    """Revoke Key

     Revoke a key, the one making the request included. It stops working on this API process at
    once and on every other within seconds (their key caches' TTL). Revoking again is a no-op.

    Args:
        tenant_id (str):
        key_id (UUID):

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        Response[Any | Problem]
    """

    kwargs = _get_kwargs(
        tenant_id=tenant_id,
        key_id=key_id,
    )

    response = await client.get_async_httpx_client().request(**kwargs)

    return _build_response(client=client, response=response)


async def asyncio(
    tenant_id: str,
    key_id: UUID,
    *,
    client: AuthenticatedClient,
) -> Any | Problem | None:
    """Revoke Key

     Revoke a key, the one making the request included. It stops working on this API process at
    once and on every other within seconds (their key caches' TTL). Revoking again is a no-op.

    Args:
        tenant_id (str):
        key_id (UUID):

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        Any | Problem
    """

    return (
        await asyncio_detailed(
            tenant_id=tenant_id,
            key_id=key_id,
            client=client,
        )
    ).parsed
