from http import HTTPStatus
from typing import Any, cast
from urllib.parse import quote

import httpx

from ...client import AuthenticatedClient, Client
from ...types import Response, UNSET
from ... import errors

from ...models.list_runs_status_type_0 import ListRunsStatusType0
from ...models.problem import Problem
from ...models.run_list import RunList
from ...types import UNSET, Unset
from typing import cast
from uuid import UUID
import datetime


def _get_kwargs(
    tenant_id: str,
    *,
    status: ListRunsStatusType0 | None | Unset = UNSET,
    job: None | str | Unset = UNSET,
    scheduled_after: datetime.datetime | None | Unset = UNSET,
    scheduled_before: datetime.datetime | None | Unset = UNSET,
    tag: list[str] | None | Unset = UNSET,
    group: None | Unset | UUID = UNSET,
    limit: int | Unset = 100,
    cursor: None | str | Unset = UNSET,
) -> dict[str, Any]:

    params: dict[str, Any] = {}

    json_status: None | str | Unset
    if isinstance(status, Unset):
        json_status = UNSET
    elif isinstance(status, ListRunsStatusType0):
        json_status = status.value
    else:
        json_status = status
    params["status"] = json_status

    json_job: None | str | Unset
    if isinstance(job, Unset):
        json_job = UNSET
    else:
        json_job = job
    params["job"] = json_job

    json_scheduled_after: None | str | Unset
    if isinstance(scheduled_after, Unset):
        json_scheduled_after = UNSET
    elif isinstance(scheduled_after, datetime.datetime):
        json_scheduled_after = scheduled_after.isoformat()
    else:
        json_scheduled_after = scheduled_after
    params["scheduled_after"] = json_scheduled_after

    json_scheduled_before: None | str | Unset
    if isinstance(scheduled_before, Unset):
        json_scheduled_before = UNSET
    elif isinstance(scheduled_before, datetime.datetime):
        json_scheduled_before = scheduled_before.isoformat()
    else:
        json_scheduled_before = scheduled_before
    params["scheduled_before"] = json_scheduled_before

    json_tag: list[str] | None | Unset
    if isinstance(tag, Unset):
        json_tag = UNSET
    elif isinstance(tag, list):
        json_tag = tag

    else:
        json_tag = tag
    params["tag"] = json_tag

    json_group: None | str | Unset
    if isinstance(group, Unset):
        json_group = UNSET
    elif isinstance(group, UUID):
        json_group = str(group)
    else:
        json_group = group
    params["group"] = json_group

    params["limit"] = limit

    json_cursor: None | str | Unset
    if isinstance(cursor, Unset):
        json_cursor = UNSET
    else:
        json_cursor = cursor
    params["cursor"] = json_cursor

    params = {k: v for k, v in params.items() if v is not UNSET and v is not None}

    _kwargs: dict[str, Any] = {
        "method": "get",
        "url": "/tenants/{tenant_id}/runs".format(
            tenant_id=quote(str(tenant_id), safe=""),
        ),
        "params": params,
    }

    return _kwargs


def _parse_response(
    *, client: AuthenticatedClient | Client, response: httpx.Response
) -> Problem | RunList | None:
    if response.status_code == 200:
        response_200 = RunList.from_dict(response.json())

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
) -> Response[Problem | RunList]:
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
    status: ListRunsStatusType0 | None | Unset = UNSET,
    job: None | str | Unset = UNSET,
    scheduled_after: datetime.datetime | None | Unset = UNSET,
    scheduled_before: datetime.datetime | None | Unset = UNSET,
    tag: list[str] | None | Unset = UNSET,
    group: None | Unset | UUID = UNSET,
    limit: int | Unset = 100,
    cursor: None | str | Unset = UNSET,
) -> Response[Problem | RunList]:
    """List Runs

     A tenant's runs, newest scheduled first, keyset-paginated: pass next_cursor back as cursor.

    Args:
        tenant_id (str):
        status (ListRunsStatusType0 | None | Unset):
        job (None | str | Unset):
        scheduled_after (datetime.datetime | None | Unset): scheduled_at >= this.
        scheduled_before (datetime.datetime | None | Unset): scheduled_at < this.
        tag (list[str] | None | Unset): Runs carrying every tag given (repeat it). At most 10 tags
            of 1 to 64 characters from A-Z a-z 0-9 _ . : / -; a repeated one counts once.
        group (None | Unset | UUID): Only the runs of this group.
        limit (int | Unset):  Default: 100.
        cursor (None | str | Unset):

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        Response[Problem | RunList]
    """

    kwargs = _get_kwargs(
        tenant_id=tenant_id,
        status=status,
        job=job,
        scheduled_after=scheduled_after,
        scheduled_before=scheduled_before,
        tag=tag,
        group=group,
        limit=limit,
        cursor=cursor,
    )

    response = client.get_httpx_client().request(
        **kwargs,
    )

    return _build_response(client=client, response=response)


def sync(
    tenant_id: str,
    *,
    client: AuthenticatedClient,
    status: ListRunsStatusType0 | None | Unset = UNSET,
    job: None | str | Unset = UNSET,
    scheduled_after: datetime.datetime | None | Unset = UNSET,
    scheduled_before: datetime.datetime | None | Unset = UNSET,
    tag: list[str] | None | Unset = UNSET,
    group: None | Unset | UUID = UNSET,
    limit: int | Unset = 100,
    cursor: None | str | Unset = UNSET,
) -> Problem | RunList | None:
    """List Runs

     A tenant's runs, newest scheduled first, keyset-paginated: pass next_cursor back as cursor.

    Args:
        tenant_id (str):
        status (ListRunsStatusType0 | None | Unset):
        job (None | str | Unset):
        scheduled_after (datetime.datetime | None | Unset): scheduled_at >= this.
        scheduled_before (datetime.datetime | None | Unset): scheduled_at < this.
        tag (list[str] | None | Unset): Runs carrying every tag given (repeat it). At most 10 tags
            of 1 to 64 characters from A-Z a-z 0-9 _ . : / -; a repeated one counts once.
        group (None | Unset | UUID): Only the runs of this group.
        limit (int | Unset):  Default: 100.
        cursor (None | str | Unset):

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        Problem | RunList
    """

    return sync_detailed(
        tenant_id=tenant_id,
        client=client,
        status=status,
        job=job,
        scheduled_after=scheduled_after,
        scheduled_before=scheduled_before,
        tag=tag,
        group=group,
        limit=limit,
        cursor=cursor,
    ).parsed


async def asyncio_detailed(
    tenant_id: str,
    *,
    client: AuthenticatedClient,
    status: ListRunsStatusType0 | None | Unset = UNSET,
    job: None | str | Unset = UNSET,
    scheduled_after: datetime.datetime | None | Unset = UNSET,
    scheduled_before: datetime.datetime | None | Unset = UNSET,
    tag: list[str] | None | Unset = UNSET,
    group: None | Unset | UUID = UNSET,
    limit: int | Unset = 100,
    cursor: None | str | Unset = UNSET,
) -> Response[Problem | RunList]:
    """List Runs

     A tenant's runs, newest scheduled first, keyset-paginated: pass next_cursor back as cursor.

    Args:
        tenant_id (str):
        status (ListRunsStatusType0 | None | Unset):
        job (None | str | Unset):
        scheduled_after (datetime.datetime | None | Unset): scheduled_at >= this.
        scheduled_before (datetime.datetime | None | Unset): scheduled_at < this.
        tag (list[str] | None | Unset): Runs carrying every tag given (repeat it). At most 10 tags
            of 1 to 64 characters from A-Z a-z 0-9 _ . : / -; a repeated one counts once.
        group (None | Unset | UUID): Only the runs of this group.
        limit (int | Unset):  Default: 100.
        cursor (None | str | Unset):

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        Response[Problem | RunList]
    """

    kwargs = _get_kwargs(
        tenant_id=tenant_id,
        status=status,
        job=job,
        scheduled_after=scheduled_after,
        scheduled_before=scheduled_before,
        tag=tag,
        group=group,
        limit=limit,
        cursor=cursor,
    )

    response = await client.get_async_httpx_client().request(**kwargs)

    return _build_response(client=client, response=response)


async def asyncio(
    tenant_id: str,
    *,
    client: AuthenticatedClient,
    status: ListRunsStatusType0 | None | Unset = UNSET,
    job: None | str | Unset = UNSET,
    scheduled_after: datetime.datetime | None | Unset = UNSET,
    scheduled_before: datetime.datetime | None | Unset = UNSET,
    tag: list[str] | None | Unset = UNSET,
    group: None | Unset | UUID = UNSET,
    limit: int | Unset = 100,
    cursor: None | str | Unset = UNSET,
) -> Problem | RunList | None:
    """List Runs

     A tenant's runs, newest scheduled first, keyset-paginated: pass next_cursor back as cursor.

    Args:
        tenant_id (str):
        status (ListRunsStatusType0 | None | Unset):
        job (None | str | Unset):
        scheduled_after (datetime.datetime | None | Unset): scheduled_at >= this.
        scheduled_before (datetime.datetime | None | Unset): scheduled_at < this.
        tag (list[str] | None | Unset): Runs carrying every tag given (repeat it). At most 10 tags
            of 1 to 64 characters from A-Z a-z 0-9 _ . : / -; a repeated one counts once.
        group (None | Unset | UUID): Only the runs of this group.
        limit (int | Unset):  Default: 100.
        cursor (None | str | Unset):

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        Problem | RunList
    """

    return (
        await asyncio_detailed(
            tenant_id=tenant_id,
            client=client,
            status=status,
            job=job,
            scheduled_after=scheduled_after,
            scheduled_before=scheduled_before,
            tag=tag,
            group=group,
            limit=limit,
            cursor=cursor,
        )
    ).parsed
