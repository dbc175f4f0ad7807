from http import HTTPStatus
from typing import Any, cast
from urllib.parse import quote

import httpx

from ...client import AuthenticatedClient, Client
from ...types import Response, UNSET
from ... import errors

from ...models.problem import Problem
from ...models.run import Run
from ...models.run_submit import RunSubmit
from ...types import UNSET, Unset
from typing import cast


def _get_kwargs(
    tenant_id: str,
    *,
    body: RunSubmit,
    idempotency_key: None | str | Unset = UNSET,
) -> dict[str, Any]:
    headers: dict[str, Any] = {}
    if not isinstance(idempotency_key, Unset):
        headers["Idempotency-Key"] = idempotency_key

    _kwargs: dict[str, Any] = {
        "method": "post",
        "url": "/tenants/{tenant_id}/runs".format(
            tenant_id=quote(str(tenant_id), safe=""),
        ),
    }

    _kwargs["json"] = body.to_dict()

    headers["Content-Type"] = "application/json"

    _kwargs["headers"] = headers
    return _kwargs


def _parse_response(
    *, client: AuthenticatedClient | Client, response: httpx.Response
) -> Problem | Run | None:
    if response.status_code == 200:
        response_200 = Run.from_dict(response.json())

        return response_200

    if response.status_code == 201:
        response_201 = Run.from_dict(response.json())

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
) -> Response[Problem | Run]:
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
    body: RunSubmit,
    idempotency_key: None | str | Unset = UNSET,
) -> Response[Problem | Run]:
    """Submit Run

     Submit one run of a job. A repeated idempotency key with the same body answers 200 with the
    same run; with another body, 422; while a request with that key is still in flight, 409. A
    duplicate of a `unique` job's run, or a submission folded into a `debounce` job's pending run,
    answers 200 with that run.

    Args:
        tenant_id (str):
        idempotency_key (None | str | Unset):
        body (RunSubmit):

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        Response[Problem | Run]
    """

    kwargs = _get_kwargs(
        tenant_id=tenant_id,
        body=body,
        idempotency_key=idempotency_key,
    )

    response = client.get_httpx_client().request(
        **kwargs,
    )

    return _build_response(client=client, response=response)


def sync(
    tenant_id: str,
    *,
    client: AuthenticatedClient,
    body: RunSubmit,
    idempotency_key: None | str | Unset = UNSET,
) -> Problem | Run | None:
    """Submit Run

     Submit one run of a job. A repeated idempotency key with the same body answers 200 with the
    same run; with another body, 422; while a request with that key is still in flight, 409. A
    duplicate of a `unique` job's run, or a submission folded into a `debounce` job's pending run,
    answers 200 with that run.

    Args:
        tenant_id (str):
        idempotency_key (None | str | Unset):
        body (RunSubmit):

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        Problem | Run
    """

    return sync_detailed(
        tenant_id=tenant_id,
        client=client,
        body=body,
        idempotency_key=idempotency_key,
    ).parsed


async def asyncio_detailed(
    tenant_id: str,
    *,
    client: AuthenticatedClient,
    body: RunSubmit,
    idempotency_key: None | str | Unset = UNSET,
) -> Response[Problem | Run]:
    """Submit Run

     Submit one run of a job. A repeated idempotency key with the same body answers 200 with the
    same run; with another body, 422; while a request with that key is still in flight, 409. A
    duplicate of a `unique` job's run, or a submission folded into a `debounce` job's pending run,
    answers 200 with that run.

    Args:
        tenant_id (str):
        idempotency_key (None | str | Unset):
        body (RunSubmit):

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        Response[Problem | Run]
    """

    kwargs = _get_kwargs(
        tenant_id=tenant_id,
        body=body,
        idempotency_key=idempotency_key,
    )

    response = await client.get_async_httpx_client().request(**kwargs)

    return _build_response(client=client, response=response)


async def asyncio(
    tenant_id: str,
    *,
    client: AuthenticatedClient,
    body: RunSubmit,
    idempotency_key: None | str | Unset = UNSET,
) -> Problem | Run | None:
    """Submit Run

     Submit one run of a job. A repeated idempotency key with the same body answers 200 with the
    same run; with another body, 422; while a request with that key is still in flight, 409. A
    duplicate of a `unique` job's run, or a submission folded into a `debounce` job's pending run,
    answers 200 with that run.

    Args:
        tenant_id (str):
        idempotency_key (None | str | Unset):
        body (RunSubmit):

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        Problem | Run
    """

    return (
        await asyncio_detailed(
            tenant_id=tenant_id,
            client=client,
            body=body,
            idempotency_key=idempotency_key,
        )
    ).parsed
