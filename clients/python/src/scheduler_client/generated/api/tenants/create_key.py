from http import HTTPStatus
from typing import Any, cast
from urllib.parse import quote

import httpx

from ...client import AuthenticatedClient, Client
from ...types import Response, UNSET
from ... import errors

from ...models.key_create import KeyCreate
from ...models.key_created import KeyCreated
from ...models.problem import Problem
from ...types import UNSET, Unset
from typing import cast


def _get_kwargs(
    tenant_id: str,
    *,
    body: KeyCreate | None | Unset = UNSET,
) -> dict[str, Any]:
    headers: dict[str, Any] = {}

    _kwargs: dict[str, Any] = {
        "method": "post",
        "url": "/tenants/{tenant_id}/keys".format(
            tenant_id=quote(str(tenant_id), safe=""),
        ),
    }

    if isinstance(body, KeyCreate):
        _kwargs["json"] = body.to_dict()
    else:
        _kwargs["json"] = body

    headers["Content-Type"] = "application/json"

    _kwargs["headers"] = headers
    return _kwargs


def _parse_response(
    *, client: AuthenticatedClient | Client, response: httpx.Response
) -> KeyCreated | Problem | None:
    if response.status_code == 201:
        response_201 = KeyCreated.from_dict(response.json())

        return response_201

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
) -> Response[KeyCreated | Problem]:
    return Response(
        status_code=HTTPStatus(response.status_code),
        content=response.content,
        headers=response.headers,
        parsed=_parse_response(client=client, response=response),
    )


def sync_detailed(
    tenant_id: str,
    *,
    client: AuthenticatedClient,
    body: KeyCreate | None | Unset = UNSET,
) -> Response[KeyCreated | Problem]:
    """Create Key

     Issue another key for the tenant, with `scopes` (default: every scope). Earlier keys keep
    working until revoked. A key issues only scopes it holds itself: asking for another is 403.

    Args:
        tenant_id (str):
        body (KeyCreate | None | Unset):

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        Response[KeyCreated | Problem]
    """

    kwargs = _get_kwargs(
        tenant_id=tenant_id,
        body=body,
    )

    response = client.get_httpx_client().request(
        **kwargs,
    )

    return _build_response(client=client, response=response)


def sync(
    tenant_id: str,
    *,
    client: AuthenticatedClient,
    body: KeyCreate | None | Unset = UNSET,
) -> KeyCreated | Problem | None:
    """Create Key

     Issue another key for the tenant, with `scopes` (default: every scope). Earlier keys keep
    working until revoked. A key issues only scopes it holds itself: asking for another is 403.

    Args:
        tenant_id (str):
        body (KeyCreate | None | Unset):

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        KeyCreated | Problem
    """

    return sync_detailed(
        tenant_id=tenant_id,
        client=client,
        body=body,
    ).parsed


async def asyncio_detailed(
    tenant_id: str,
    *,
    client: AuthenticatedClient,
    body: KeyCreate | None | Unset = UNSET,
) -> Response[KeyCreated | Problem]:
    """Create Key

     Issue another key for the tenant, with `scopes` (default: every scope). Earlier keys keep
    working until revoked. A key issues only scopes it holds itself: asking for another is 403.

    Args:
        tenant_id (str):
        body (KeyCreate | None | Unset):

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        Response[KeyCreated | Problem]
    """

    kwargs = _get_kwargs(
        tenant_id=tenant_id,
        body=body,
    )

    response = await client.get_async_httpx_client().request(**kwargs)

    return _build_response(client=client, response=response)


async def asyncio(
    tenant_id: str,
    *,
    client: AuthenticatedClient,
    body: KeyCreate | None | Unset = UNSET,
) -> KeyCreated | Problem | None:
    """Create Key

     Issue another key for the tenant, with `scopes` (default: every scope). Earlier keys keep
    working until revoked. A key issues only scopes it holds itself: asking for another is 403.

    Args:
        tenant_id (str):
        body (KeyCreate | None | Unset):

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        KeyCreated | Problem
    """

    return (
        await asyncio_detailed(
            tenant_id=tenant_id,
            client=client,
            body=body,
        )
    ).parsed
