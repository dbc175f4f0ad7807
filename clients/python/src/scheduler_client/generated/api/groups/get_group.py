from http import HTTPStatus
from typing import Any, cast
from urllib.parse import quote

import httpx

from ...client import AuthenticatedClient, Client
from ...types import Response, UNSET
from ... import errors

from ...models.group import Group
from ...models.problem import Problem
from typing import cast
from uuid import UUID


def _get_kwargs(
    tenant_id: str,
    group_id: UUID,
) -> dict[str, Any]:

    _kwargs: dict[str, Any] = {
        "method": "get",
        "url": "/tenants/{tenant_id}/groups/{group_id}".format(
            tenant_id=quote(str(tenant_id), safe=""),
            group_id=quote(str(group_id), safe=""),
        ),
    }

    return _kwargs


def _parse_response(
    *, client: AuthenticatedClient | Client, response: httpx.Response
) -> Group | Problem | None:
    if response.status_code == 200:
        response_200 = Group.from_dict(response.json())

        return response_200

    if response.status_code == 401:
        response_401 = Problem.from_dict(response.json())

        return response_401

    if response.status_code == 403:
        response_403 = Problem.from_dict(response.json())

        return response_403

    if response.status_code == 404:
        response_404 = Problem.from_dict(response.json())

        return response_404

    if response.status_code == 422:
        response_422 = Problem.from_dict(response.json())

        return response_422

    if client.raise_on_unexpected_status:
        raise errors.UnexpectedStatus(response.status_code, response.content)
    else:
        return None


def _build_response(
    *, client: AuthenticatedClient | Client, response: httpx.Response
) -> Response[Group | Problem]:
    return Response(
        status_code=HTTPStatus(response.status_code),
        content=response.content,
        headers=response.headers,
        parsed=_parse_response(client=client, response=response),
    )


def sync_detailed(
    tenant_id: str,
    group_id: UUID,
    *,
    client: AuthenticatedClient,
) -> Response[Group | Problem]:
    """Get Group

     A group's progress: its runs counted by status, and once every one has ended, when it
    completed and what its completion made (`completion_run_id`, or the callback's delivery). Its
    runs: GET /tenants/{tenant_id}/runs?group={group_id}.

    Args:
        tenant_id (str):
        group_id (UUID):

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        Response[Group | Problem]
    """

    kwargs = _get_kwargs(
        tenant_id=tenant_id,
        group_id=group_id,
    )

    response = client.get_httpx_client().request(
        **kwargs,
    )

    return _build_response(client=client, response=response)


def sync(
    tenant_id: str,
    group_id: UUID,
    *,
    client: AuthenticatedClient,
) -> Group | Problem | None:
    """Get Group

     A group's progress: its runs counted by status, and once every one has ended, when it
    completed and what its completion made (`completion_run_id`, or the callback's delivery). Its
    runs: GET /tenants/{tenant_id}/runs?group={group_id}.

    Args:
        tenant_id (str):
        group_id (UUID):

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        Group | Problem
    """

    return sync_detailed(
        tenant_id=tenant_id,
        group_id=group_id,
        client=client,
    ).parsed


async def asyncio_detailed(
    tenant_id: str,
    group_id: UUID,
    *,
    client: AuthenticatedClient,
) -> Response[Group | Problem]:
    """Get Group

     A group's progress: its runs counted by status, and once every one has ended, when it
    completed and what its completion made (`completion_run_id`, or the callback's delivery). Its
    runs: GET /tenants/{tenant_id}/runs?group={group_id}.

    Args:
        tenant_id (str):
        group_id (UUID):

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        Response[Group | Problem]
    """

    kwargs = _get_kwargs(
        tenant_id=tenant_id,
        group_id=group_id,
    )

    response = await client.get_async_httpx_client().request(**kwargs)

    return _build_response(client=client, response=response)


async def asyncio(
    tenant_id: str,
    group_id: UUID,
    *,
    client: AuthenticatedClient,
) -> Group | Problem | None:
    """Get Group

     A group's progress: its runs counted by status, and once every one has ended, when it
    completed and what its completion made (`completion_run_id`, or the callback's delivery). Its
    runs: GET /tenants/{tenant_id}/runs?group={group_id}.

    Args:
        tenant_id (str):
        group_id (UUID):

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        Group | Problem
    """

    return (
        await asyncio_detailed(
            tenant_id=tenant_id,
            group_id=group_id,
            client=client,
        )
    ).parsed
