from http import HTTPStatus
from typing import Any, cast
from urllib.parse import quote

import httpx

from ...client import AuthenticatedClient, Client
from ...types import Response, UNSET
from ... import errors

from ...models.backfill import Backfill
from ...models.backfill_result import BackfillResult
from ...models.problem import Problem
from typing import cast


def _get_kwargs(
    tenant_id: str,
    name: str,
    *,
    body: Backfill,
) -> dict[str, Any]:
    headers: dict[str, Any] = {}

    _kwargs: dict[str, Any] = {
        "method": "post",
        "url": "/tenants/{tenant_id}/jobs/{name}/backfill".format(
            tenant_id=quote(str(tenant_id), safe=""),
            name=quote(str(name), safe=""),
        ),
    }

    _kwargs["json"] = body.to_dict()

    headers["Content-Type"] = "application/json"

    _kwargs["headers"] = headers
    return _kwargs


def _parse_response(
    *, client: AuthenticatedClient | Client, response: httpx.Response
) -> BackfillResult | Problem | None:
    if response.status_code == 200:
        response_200 = BackfillResult.from_dict(response.json())

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

    if response.status_code == 409:
        response_409 = Problem.from_dict(response.json())

        return response_409

    if response.status_code == 413:
        response_413 = Problem.from_dict(response.json())

        return response_413

    if response.status_code == 422:
        response_422 = Problem.from_dict(response.json())

        return response_422

    if response.status_code == 429:
        response_429 = Problem.from_dict(response.json())

        return response_429

    if client.raise_on_unexpected_status:
        raise errors.UnexpectedStatus(response.status_code, response.content)
    else:
        return None


def _build_response(
    *, client: AuthenticatedClient | Client, response: httpx.Response
) -> Response[BackfillResult | Problem]:
    return Response(
        status_code=HTTPStatus(response.status_code),
        content=response.content,
        headers=response.headers,
        parsed=_parse_response(client=client, response=response),
    )


def sync_detailed(
    tenant_id: str,
    name: str,
    *,
    client: AuthenticatedClient,
    body: Backfill,
) -> Response[BackfillResult | Problem]:
    """Backfill Job

     Make the cron job's occurrences in [from, to) into runs, each at most once however often it is
    asked (a run the schedule or an earlier backfill made is counted in `existing`), at most 1000 per
    request, within the tenant's backlog quota (429). A job without a schedule is 409.

    Args:
        tenant_id (str):
        name (str):
        body (Backfill):

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        Response[BackfillResult | Problem]
    """

    kwargs = _get_kwargs(
        tenant_id=tenant_id,
        name=name,
        body=body,
    )

    response = client.get_httpx_client().request(
        **kwargs,
    )

    return _build_response(client=client, response=response)


def sync(
    tenant_id: str,
    name: str,
    *,
    client: AuthenticatedClient,
    body: Backfill,
) -> BackfillResult | Problem | None:
    """Backfill Job

     Make the cron job's occurrences in [from, to) into runs, each at most once however often it is
    asked (a run the schedule or an earlier backfill made is counted in `existing`), at most 1000 per
    request, within the tenant's backlog quota (429). A job without a schedule is 409.

    Args:
        tenant_id (str):
        name (str):
        body (Backfill):

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        BackfillResult | Problem
    """

    return sync_detailed(
        tenant_id=tenant_id,
        name=name,
        client=client,
        body=body,
    ).parsed


async def asyncio_detailed(
    tenant_id: str,
    name: str,
    *,
    client: AuthenticatedClient,
    body: Backfill,
) -> Response[BackfillResult | Problem]:
    """Backfill Job

     Make the cron job's occurrences in [from, to) into runs, each at most once however often it is
    asked (a run the schedule or an earlier backfill made is counted in `existing`), at most 1000 per
    request, within the tenant's backlog quota (429). A job without a schedule is 409.

    Args:
        tenant_id (str):
        name (str):
        body (Backfill):

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        Response[BackfillResult | Problem]
    """

    kwargs = _get_kwargs(
        tenant_id=tenant_id,
        name=name,
        body=body,
    )

    response = await client.get_async_httpx_client().request(**kwargs)

    return _build_response(client=client, response=response)


async def asyncio(
    tenant_id: str,
    name: str,
    *,
    client: AuthenticatedClient,
    body: Backfill,
) -> BackfillResult | Problem | None:
    """Backfill Job

     Make the cron job's occurrences in [from, to) into runs, each at most once however often it is
    asked (a run the schedule or an earlier backfill made is counted in `existing`), at most 1000 per
    request, within the tenant's backlog quota (429). A job without a schedule is 409.

    Args:
        tenant_id (str):
        name (str):
        body (Backfill):

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        BackfillResult | Problem
    """

    return (
        await asyncio_detailed(
            tenant_id=tenant_id,
            name=name,
            client=client,
            body=body,
        )
    ).parsed
