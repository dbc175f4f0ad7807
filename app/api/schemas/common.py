"""What every resource's bodies share: id and name patterns, field rules, `Strict`, problem details
(the error answers) and the health answer."""

from __future__ import annotations

from typing import Annotated, Any, get_args

from fastapi import Response
from pydantic import AfterValidator, BaseModel, ConfigDict, Field

from app.domain import MAX_TAGS, dump_json
from app.errors import PROBLEM_JSON, PROBLEM_TYPE
from app.services.targets import HttpTarget, NoopTarget, PythonTarget

TENANT_ID_PATTERN = r"^[a-z0-9][a-z0-9_-]{0,62}$"
JOB_NAME_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9_.:-]{0,127}$"
JobName = Annotated[str, Field(pattern=JOB_NAME_PATTERN, examples=["send-report"])]
# The `type` tags of a job's target, as the discriminated union `Target` declares them.
TARGET_TYPES = frozenset(
    get_args(m.model_fields["type"].annotation)[0] for m in (HttpTarget, PythonTarget, NoopTarget)
)
TAG_PATTERN = r"^[A-Za-z0-9_.:/-]{1,64}$"
Tag = Annotated[str, Field(pattern=TAG_PATTERN, examples=["customer:42"])]
TAGS_RULE = (
    f"At most {MAX_TAGS} tags of 1 to 64 characters from A-Z a-z 0-9 _ . : / -; a repeated one counts once."
)
# Deduplicated in the order given; the bound applies to the list as sent, before any work on it.
Tags = Annotated[
    list[Tag], Field(max_length=MAX_TAGS), AfterValidator(lambda tags: list(dict.fromkeys(tags)))
]
PAYLOAD_RULE = "Any JSON, at most SCHEDULER_MAX_PAYLOAD_BYTES (65536) encoded, without NUL characters."
# Oban's convention: 0 most urgent, 9 least. Strict: "1" or 1.5 or true is a 422, not a guess.
PRIORITY_RULE = "0 (most urgent) to 9 (least); among due runs, a more urgent one is claimed first."
Priority = Annotated[int, Field(ge=0, le=9, strict=True, description=PRIORITY_RULE)]


class Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


class Problem(BaseModel):
    """An error, as RFC 9457 problem details, served as application/problem+json."""

    type: str = Field(
        default=PROBLEM_TYPE,
        description="`about:blank`: each problem means what its status means; `code` names the kind.",
    )
    title: str = Field(description="The status's phrase, e.g. Unprocessable Content.", examples=["Not Found"])
    status: int = Field(ge=400, le=599)
    detail: str = Field(description="What went wrong, for a person.")
    code: str = Field(
        description="Stable, for programs: invalid_input, unauthorized, forbidden, not_found, conflict, "
        "payload_too_large, over_quota, method_not_allowed, internal_error, unavailable. "
        "New codes may be added.",
        examples=["not_found"],
    )
    field: str | None = Field(
        default=None, description="The input at fault, e.g. runs[3].scheduled_at or Authorization."
    )


RETRY_AFTER = {
    "Retry-After": {
        "description": "Seconds to wait before submitting again.",
        "schema": {"type": "integer", "minimum": 0},
    }
}


def error_responses(
    *codes: int, success: dict[int, type[BaseModel]] | None = None
) -> dict[int | str, dict[str, Any]]:
    """The OpenAPI `responses` of a route: its error answers are all problem details (a 429 with
    its Retry-After); `success` adds the other successful answers a route gives (200 beside 201)."""
    responses: dict[int | str, dict[str, Any]] = {code: {"model": Problem} for code in codes}
    if 429 in responses:
        responses[429]["headers"] = RETRY_AFTER
    for code, model in (success or {}).items():
        responses[code] = {"model": model}
    return responses


def serve_problems_as_problem_json(schema: dict[str, Any]) -> dict[str, Any]:
    """FastAPI documents every response model as application/json; errors are application/problem+json."""
    problem_ref = "#/components/schemas/Problem"
    for path in schema.get("paths", {}).values():
        for operation in path.values():
            for response in operation.get("responses", {}).values():
                content = response.get("content", {})
                if content.get("application/json", {}).get("schema", {}).get("$ref") == problem_ref:
                    content[PROBLEM_JSON] = content.pop("application/json")
    return schema


class Health(BaseModel):
    status: str
    checks: dict[str, str] = Field(default_factory=dict)


def json_response(body: Any, status_code: int = 200) -> Response:
    """Run records (app.domain.RunRecord) are answered this way, without pydantic's re-validation:
    a batch answer is 1000 of them."""
    return Response(
        dump_json(body),
        status_code=status_code,
        media_type="application/json",
    )
