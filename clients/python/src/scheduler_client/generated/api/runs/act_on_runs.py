from http import HTTPStatus
from typing import Any, cast
from urllib.parse import quote

import httpx

from ...client import AuthenticatedClient, Client
from ...types import Response, UNSET
from ... import errors

from ...models.problem import Problem
from ...models.run_action import RunAction
from ...models.run_action_result import RunActionResult
from typing import cast


def _get_kwargs(
    tenant_id: str,
    *,
    body: RunAction,
) -> dict[str, Any]:
    headers: dict[str, Any] = {}

    _kwargs: dict[str, Any] = {
        "method": "post",
        "url": "/tenants/{tenant_id}/runs/actions".format(
            tenant_id=quote(str(tenant_id), safe=""),
        ),
    }

    _kwargs["json"] = body.to_dict()

    headers["Content-Type"] = "application/json"

    _kwargs["headers"] = headers
    return _kwargs


def _parse_response(
    *, client: AuthenticatedClient | Client, response: httpx.Response
) -> Problem | RunActionResult | None:
    if response.status_code == 200:
        response_200 = RunActionResult.from_dict(response.json())

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
) -> Response[Problem | RunActionResult]:
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
    body: RunAction,
) -> Response[Problem | RunActionResult]:
    """Act On Runs

     Cancel (pending, dispatched or running: a running run's worker is told to stop it, as
    POST /runs/{run_id}/cancel does) or retry (failed or cancelled) up to `limit` of the tenant's
    runs matching `filter`, newest scheduled first, in chunks that never hold locks for long. A run
    already in the target state is not changed again, so a request can be repeated; when
    `next_cursor` is not null, send it back as `cursor` to go on. A retry over the tenant's backlog
    quota: 429 if nothing was changed yet, otherwise the runs changed so far and a `next_cursor`
    where it stopped.

    Args:
        tenant_id (str):
        body (RunAction):

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        Response[Problem | RunActionResult]
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
    body: RunAction,
) -> Problem | RunActionResult | None:
    """Act On Runs

     Cancel (pending, dispatched or running: a running run's worker is told to stop it, as
    POST /runs/{run_id}/cancel does) or retry (failed or cancelled) up to `limit` of the tenant's
    runs matching `filter`, newest scheduled first, in chunks that never hold locks for long. A run
    already in the target state is not changed again, so a request can be repeated; when
    `next_cursor` is not null, send it back as `cursor` to go on. A retry over the tenant's backlog
    quota: 429 if nothing was changed yet, otherwise the runs changed so far and a `next_cursor`
    where it stopped.

    Args:
        tenant_id (str):
        body (RunAction):

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        Problem | RunActionResult
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
    body: RunAction,
) -> Response[Problem | RunActionResult]:
    """Act On Runs

     Cancel (pending, dispatched or running: a running run's worker is told to stop it, as
    POST /runs/{run_id}/cancel does) or retry (failed or cancelled) up to `limit` of the tenant's
    runs matching `filter`, newest scheduled first, in chunks that never hold locks for long. A run
    already in the target state is not changed again, so a request can be repeated; when
    `next_cursor` is not null, send it back as `cursor` to go on. A retry over the tenant's backlog
    quota: 429 if nothing was changed yet, otherwise the runs changed so far and a `next_cursor`
    where it stopped.

    Args:
        tenant_id (str):
        body (RunAction):

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        Response[Problem | RunActionResult]
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
    body: RunAction,
) -> Problem | RunActionResult | None:
    """Act On Runs

     Cancel (pending, dispatched or running: a running run's worker is told to stop it, as
    POST /runs/{run_id}/cancel does) or retry (failed or cancelled) up to `limit` of the tenant's
    runs matching `filter`, newest scheduled first, in chunks that never hold locks for long. A run
    already in the target state is not changed again, so a request can be repeated; when
    `next_cursor` is not null, send it back as `cursor` to go on. A retry over the tenant's backlog
    quota: 429 if nothing was changed yet, otherwise the runs changed so far and a `next_cursor`
    where it stopped.

    Args:
        tenant_id (str):
        body (RunAction):

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        Problem | RunActionResult
    """

    return (
        await asyncio_detailed(
            tenant_id=tenant_id,
            client=client,
            body=body,
        )
    ).parsed
