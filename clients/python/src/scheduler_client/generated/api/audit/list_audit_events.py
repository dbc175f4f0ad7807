from http import HTTPStatus
from typing import Any, cast
from urllib.parse import quote

import httpx

from ...client import AuthenticatedClient, Client
from ...types import Response, UNSET
from ... import errors

from ...models.audit_event_list import AuditEventList
from ...models.list_audit_events_action_type_0 import ListAuditEventsActionType0
from ...models.problem import Problem
from ...types import UNSET, Unset
from typing import cast


def _get_kwargs(
    tenant_id: str,
    *,
    action: ListAuditEventsActionType0 | None | Unset = UNSET,
    limit: int | Unset = 100,
    cursor: None | str | Unset = UNSET,
) -> dict[str, Any]:

    params: dict[str, Any] = {}

    json_action: None | str | Unset
    if isinstance(action, Unset):
        json_action = UNSET
    elif isinstance(action, ListAuditEventsActionType0):
        json_action = action.value
    else:
        json_action = action
    params["action"] = json_action

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
        "url": "/tenants/{tenant_id}/audit".format(
            tenant_id=quote(str(tenant_id), safe=""),
        ),
        "params": params,
    }

    return _kwargs


def _parse_response(
    *, client: AuthenticatedClient | Client, response: httpx.Response
) -> AuditEventList | Problem | None:
    if response.status_code == 200:
        response_200 = AuditEventList.from_dict(response.json())

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
) -> Response[AuditEventList | Problem]:
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
    action: ListAuditEventsActionType0 | None | Unset = UNSET,
    limit: int | Unset = 100,
    cursor: None | str | Unset = UNSET,
) -> Response[AuditEventList | Problem]:
    """List Audit Events

     Every change made to the tenant through the API or the dashboard (runs submitted by clients
    are not changes here), newest first, keyset-paginated: pass next_cursor back as cursor. Kept
    SCHEDULER_AUDIT_RETENTION_DAYS days. The tenant's key or the admin token.

    Args:
        tenant_id (str):
        action (ListAuditEventsActionType0 | None | Unset): Only events of this action.
        limit (int | Unset):  Default: 100.
        cursor (None | str | Unset):

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        Response[AuditEventList | Problem]
    """

    kwargs = _get_kwargs(
        tenant_id=tenant_id,
        action=action,
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
    action: ListAuditEventsActionType0 | None | Unset = UNSET,
    limit: int | Unset = 100,
    cursor: None | str | Unset = UNSET,
) -> AuditEventList | Problem | None:
    """List Audit Events

     Every change made to the tenant through the API or the dashboard (runs submitted by clients
    are not changes here), newest first, keyset-paginated: pass next_cursor back as cursor. Kept
    SCHEDULER_AUDIT_RETENTION_DAYS days. The tenant's key or the admin token.

    Args:
        tenant_id (str):
        action (ListAuditEventsActionType0 | None | Unset): Only events of this action.
        limit (int | Unset):  Default: 100.
        cursor (None | str | Unset):

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        AuditEventList | Problem
    """

    return sync_detailed(
        tenant_id=tenant_id,
        client=client,
        action=action,
        limit=limit,
        cursor=cursor,
    ).parsed


async def asyncio_detailed(
    tenant_id: str,
    *,
    client: AuthenticatedClient,
    action: ListAuditEventsActionType0 | None | Unset = UNSET,
    limit: int | Unset = 100,
    cursor: None | str | Unset = UNSET,
) -> Response[AuditEventList | Problem]:
    """List Audit Events

     Every change made to the tenant through the API or the dashboard (runs submitted by clients
    are not changes here), newest first, keyset-paginated: pass next_cursor back as cursor. Kept
    SCHEDULER_AUDIT_RETENTION_DAYS days. The tenant's key or the admin token.

    Args:
        tenant_id (str):
        action (ListAuditEventsActionType0 | None | Unset): Only events of this action.
        limit (int | Unset):  Default: 100.
        cursor (None | str | Unset):

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        Response[AuditEventList | Problem]
    """

    kwargs = _get_kwargs(
        tenant_id=tenant_id,
        action=action,
        limit=limit,
        cursor=cursor,
    )

    response = await client.get_async_httpx_client().request(**kwargs)

    return _build_response(client=client, response=response)


async def asyncio(
    tenant_id: str,
    *,
    client: AuthenticatedClient,
    action: ListAuditEventsActionType0 | None | Unset = UNSET,
    limit: int | Unset = 100,
    cursor: None | str | Unset = UNSET,
) -> AuditEventList | Problem | None:
    """List Audit Events

     Every change made to the tenant through the API or the dashboard (runs submitted by clients
    are not changes here), newest first, keyset-paginated: pass next_cursor back as cursor. Kept
    SCHEDULER_AUDIT_RETENTION_DAYS days. The tenant's key or the admin token.

    Args:
        tenant_id (str):
        action (ListAuditEventsActionType0 | None | Unset): Only events of this action.
        limit (int | Unset):  Default: 100.
        cursor (None | str | Unset):

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        AuditEventList | Problem
    """

    return (
        await asyncio_detailed(
            tenant_id=tenant_id,
            client=client,
            action=action,
            limit=limit,
            cursor=cursor,
        )
    ).parsed
