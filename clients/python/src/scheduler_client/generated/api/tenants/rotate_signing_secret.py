from http import HTTPStatus
from typing import Any, cast
from urllib.parse import quote

import httpx

from ...client import AuthenticatedClient, Client
from ...types import Response, UNSET
from ... import errors

from ...models.problem import Problem
from ...models.signing_secret_created import SigningSecretCreated
from ...models.signing_secret_rotation import SigningSecretRotation
from ...types import UNSET, Unset
from typing import cast


def _get_kwargs(
    tenant_id: str,
    *,
    body: None | SigningSecretRotation | Unset = UNSET,
) -> dict[str, Any]:
    headers: dict[str, Any] = {}

    _kwargs: dict[str, Any] = {
        "method": "post",
        "url": "/tenants/{tenant_id}/signing-secrets".format(
            tenant_id=quote(str(tenant_id), safe=""),
        ),
    }

    if isinstance(body, SigningSecretRotation):
        _kwargs["json"] = body.to_dict()
    else:
        _kwargs["json"] = body

    headers["Content-Type"] = "application/json"

    _kwargs["headers"] = headers
    return _kwargs


def _parse_response(
    *, client: AuthenticatedClient | Client, response: httpx.Response
) -> Problem | SigningSecretCreated | None:
    if response.status_code == 201:
        response_201 = SigningSecretCreated.from_dict(response.json())

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
) -> Response[Problem | SigningSecretCreated]:
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
    body: None | SigningSecretRotation | Unset = UNSET,
) -> Response[Problem | SigningSecretCreated]:
    """Rotate Signing Secret

     A new webhook signing secret. Until `previous_expires_at` every webhook is signed under both
    (two signatures in `webhook-signature`), so receivers can switch at their pace; then the old one
    is dropped. Workers pick the new secret up within SCHEDULER_SIGNING_SECRET_CACHE_SECONDS.
    Rotating again within an overlap retires the oldest secret at once.

    Args:
        tenant_id (str):
        body (None | SigningSecretRotation | Unset):

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        Response[Problem | SigningSecretCreated]
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
    body: None | SigningSecretRotation | Unset = UNSET,
) -> Problem | SigningSecretCreated | None:
    """Rotate Signing Secret

     A new webhook signing secret. Until `previous_expires_at` every webhook is signed under both
    (two signatures in `webhook-signature`), so receivers can switch at their pace; then the old one
    is dropped. Workers pick the new secret up within SCHEDULER_SIGNING_SECRET_CACHE_SECONDS.
    Rotating again within an overlap retires the oldest secret at once.

    Args:
        tenant_id (str):
        body (None | SigningSecretRotation | Unset):

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        Problem | SigningSecretCreated
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
    body: None | SigningSecretRotation | Unset = UNSET,
) -> Response[Problem | SigningSecretCreated]:
    """Rotate Signing Secret

     A new webhook signing secret. Until `previous_expires_at` every webhook is signed under both
    (two signatures in `webhook-signature`), so receivers can switch at their pace; then the old one
    is dropped. Workers pick the new secret up within SCHEDULER_SIGNING_SECRET_CACHE_SECONDS.
    Rotating again within an overlap retires the oldest secret at once.

    Args:
        tenant_id (str):
        body (None | SigningSecretRotation | Unset):

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        Response[Problem | SigningSecretCreated]
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
    body: None | SigningSecretRotation | Unset = UNSET,
) -> Problem | SigningSecretCreated | None:
    """Rotate Signing Secret

     A new webhook signing secret. Until `previous_expires_at` every webhook is signed under both
    (two signatures in `webhook-signature`), so receivers can switch at their pace; then the old one
    is dropped. Workers pick the new secret up within SCHEDULER_SIGNING_SECRET_CACHE_SECONDS.
    Rotating again within an overlap retires the oldest secret at once.

    Args:
        tenant_id (str):
        body (None | SigningSecretRotation | Unset):

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        Problem | SigningSecretCreated
    """

    return (
        await asyncio_detailed(
            tenant_id=tenant_id,
            client=client,
            body=body,
        )
    ).parsed
