from __future__ import annotations

from collections.abc import Mapping
from typing import Any, TypeVar, BinaryIO, TextIO, TYPE_CHECKING, Generator

from attrs import define as _attrs_define
from attrs import field as _attrs_field

from ..types import UNSET, Unset

from ..models.http_target_body import HttpTargetBody
from ..models.http_target_method import HttpTargetMethod
from ..types import UNSET, Unset
from typing import cast
from typing import Literal, cast

if TYPE_CHECKING:
    from ..models.http_target_headers import HttpTargetHeaders


T = TypeVar("T", bound="HttpTarget")


@_attrs_define
class HttpTarget:
    """
    Attributes:
        type_ (Literal['http']):
        url (str):
        body (HttpTargetBody | Unset): `payload`: the run's payload is the body, as GET /runs/{id} answers it, so any
            HTTP API can be a target. `envelope`: the Standard Webhooks envelope around it, which signs the run id, attempt,
            epoch, method and URL too (docs/webhooks.md). Default: HttpTargetBody.PAYLOAD.
        headers (HttpTargetHeaders | Unset):
        method (HttpTargetMethod | Unset):  Default: HttpTargetMethod.POST.
    """

    type_: Literal["http"]
    url: str
    body: HttpTargetBody | Unset = HttpTargetBody.PAYLOAD
    headers: HttpTargetHeaders | Unset = UNSET
    method: HttpTargetMethod | Unset = HttpTargetMethod.POST

    def to_dict(self) -> dict[str, Any]:
        from ..models.http_target_headers import HttpTargetHeaders  # noqa: PLC0415

        type_ = self.type_

        url = self.url

        body: str | Unset = UNSET
        if not isinstance(self.body, Unset):
            body = self.body.value

        headers: dict[str, Any] | Unset = UNSET
        if not isinstance(self.headers, Unset):
            headers = self.headers.to_dict()

        method: str | Unset = UNSET
        if not isinstance(self.method, Unset):
            method = self.method.value

        field_dict: dict[str, Any] = {}

        field_dict.update(
            {
                "type": type_,
                "url": url,
            }
        )
        if body is not UNSET:
            field_dict["body"] = body
        if headers is not UNSET:
            field_dict["headers"] = headers
        if method is not UNSET:
            field_dict["method"] = method

        return field_dict

    @classmethod
    def from_dict(cls: type[T], src_dict: Mapping[str, Any]) -> T:
        from ..models.http_target_headers import HttpTargetHeaders  # noqa: PLC0415

        d = dict(src_dict)
        type_ = cast(Literal["http"], d.pop("type"))
        if type_ != "http":
            raise ValueError(f"type must match const 'http', got '{type_}'")

        url = d.pop("url")

        _body = d.pop("body", UNSET)
        body: HttpTargetBody | Unset
        if isinstance(_body, Unset):
            body = UNSET
        else:
            body = HttpTargetBody(_body)

        _headers = d.pop("headers", UNSET)
        headers: HttpTargetHeaders | Unset
        if isinstance(_headers, Unset):
            headers = UNSET
        else:
            headers = HttpTargetHeaders.from_dict(_headers)

        _method = d.pop("method", UNSET)
        method: HttpTargetMethod | Unset
        if isinstance(_method, Unset):
            method = UNSET
        else:
            method = HttpTargetMethod(_method)

        http_target = cls(
            type_=type_,
            url=url,
            body=body,
            headers=headers,
            method=method,
        )

        return http_target
