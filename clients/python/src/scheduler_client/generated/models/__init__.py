"""Contains all the data models used in inputs/outputs"""

from .api_key import ApiKey
from .api_key_list import ApiKeyList
from .api_key_scopes_item import ApiKeyScopesItem
from .attempt import Attempt
from .attempt_outcome_type_0 import AttemptOutcomeType0
from .audit_actor import AuditActor
from .audit_actor_type import AuditActorType
from .audit_event import AuditEvent
from .audit_event_action import AuditEventAction
from .audit_event_detail import AuditEventDetail
from .audit_event_list import AuditEventList
from .backfill import Backfill
from .backfill_result import BackfillResult
from .callback import Callback
from .callback_on_item import CallbackOnItem
from .callback_state import CallbackState
from .callback_state_on_item import CallbackStateOnItem
from .callback_state_status_type_0 import CallbackStateStatusType0
from .concurrency import Concurrency
from .debounce import Debounce
from .event_publish import EventPublish
from .event_runs import EventRuns
from .group import Group
from .group_callback import GroupCallback
from .group_callback_state import GroupCallbackState
from .group_list import GroupList
from .group_on_complete_type_0 import GroupOnCompleteType0
from .group_ref import GroupRef
from .group_spec import GroupSpec
from .health import Health
from .health_checks import HealthChecks
from .http_target import HttpTarget
from .http_target_body import HttpTargetBody
from .http_target_headers import HttpTargetHeaders
from .http_target_method import HttpTargetMethod
from .job import Job
from .job_list import JobList
from .job_overlap import JobOverlap
from .job_paused_reason_type_0 import JobPausedReasonType0
from .job_put import JobPut
from .job_put_misfire import JobPutMisfire
from .job_put_overlap import JobPutOverlap
from .key_create import KeyCreate
from .key_create_scopes_item import KeyCreateScopesItem
from .key_created import KeyCreated
from .key_created_scopes_item import KeyCreatedScopesItem
from .list_audit_events_action_type_0 import ListAuditEventsActionType0
from .list_runs_status_type_0 import ListRunsStatusType0
from .noop_target import NoopTarget
from .on_complete import OnComplete
from .on_complete_payload_type_0 import OnCompletePayloadType0
from .problem import Problem
from .python_target import PythonTarget
from .rate_limit import RateLimit
from .run import Run
from .run_action import RunAction
from .run_action_action import RunActionAction
from .run_action_result import RunActionResult
from .run_batch import RunBatch
from .run_batch_submit import RunBatchSubmit
from .run_filter import RunFilter
from .run_filter_status_type_0_item import RunFilterStatusType0Item
from .run_held_type_0 import RunHeldType0
from .run_list import RunList
from .run_metadata_type_0 import RunMetadataType0
from .run_reschedule import RunReschedule
from .run_retry import RunRetry
from .run_status import RunStatus
from .run_submit import RunSubmit
from .run_submit_metadata_type_0 import RunSubmitMetadataType0
from .run_submit_on_parent_failure import RunSubmitOnParentFailure
from .signing_secret_created import SigningSecretCreated
from .signing_secret_rotation import SigningSecretRotation
from .tenant import Tenant
from .tenant_create import TenantCreate
from .tenant_created import TenantCreated
from .tenant_patch import TenantPatch
from .tenant_pause import TenantPause
from .unique import Unique

__all__ = (
    "ApiKey",
    "ApiKeyList",
    "ApiKeyScopesItem",
    "Attempt",
    "AttemptOutcomeType0",
    "AuditActor",
    "AuditActorType",
    "AuditEvent",
    "AuditEventAction",
    "AuditEventDetail",
    "AuditEventList",
    "Backfill",
    "BackfillResult",
    "Callback",
    "CallbackOnItem",
    "CallbackState",
    "CallbackStateOnItem",
    "CallbackStateStatusType0",
    "Concurrency",
    "Debounce",
    "EventPublish",
    "EventRuns",
    "Group",
    "GroupCallback",
    "GroupCallbackState",
    "GroupList",
    "GroupOnCompleteType0",
    "GroupRef",
    "GroupSpec",
    "Health",
    "HealthChecks",
    "HttpTarget",
    "HttpTargetBody",
    "HttpTargetHeaders",
    "HttpTargetMethod",
    "Job",
    "JobList",
    "JobOverlap",
    "JobPausedReasonType0",
    "JobPut",
    "JobPutMisfire",
    "JobPutOverlap",
    "KeyCreate",
    "KeyCreated",
    "KeyCreatedScopesItem",
    "KeyCreateScopesItem",
    "ListAuditEventsActionType0",
    "ListRunsStatusType0",
    "NoopTarget",
    "OnComplete",
    "OnCompletePayloadType0",
    "Problem",
    "PythonTarget",
    "RateLimit",
    "Run",
    "RunAction",
    "RunActionAction",
    "RunActionResult",
    "RunBatch",
    "RunBatchSubmit",
    "RunFilter",
    "RunFilterStatusType0Item",
    "RunHeldType0",
    "RunList",
    "RunMetadataType0",
    "RunReschedule",
    "RunRetry",
    "RunStatus",
    "RunSubmit",
    "RunSubmitMetadataType0",
    "RunSubmitOnParentFailure",
    "SigningSecretCreated",
    "SigningSecretRotation",
    "Tenant",
    "TenantCreate",
    "TenantCreated",
    "TenantPatch",
    "TenantPause",
    "Unique",
)
