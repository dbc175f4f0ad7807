from __future__ import annotations

from collections.abc import Mapping
from typing import Any, TypeVar, BinaryIO, TextIO, TYPE_CHECKING, Generator

from attrs import define as _attrs_define
from attrs import field as _attrs_field

from ..types import UNSET, Unset

from ..types import UNSET, Unset
from typing import cast

if TYPE_CHECKING:
    from ..models.group_spec import GroupSpec
    from ..models.run_submit import RunSubmit


T = TypeVar("T", bound="RunBatchSubmit")


@_attrs_define
class RunBatchSubmit:
    """
    Attributes:
        runs (list[RunSubmit]): At most SCHEDULER_MAX_BATCH (1000) runs.
        group (GroupSpec | None | Unset): The group the runs go into: a new one (`name`, and `on_complete`: one run of a
            job or one callback once every run of it has ended), or an open one (`id`).
    """

    runs: list[RunSubmit]
    group: GroupSpec | None | Unset = UNSET

    def to_dict(self) -> dict[str, Any]:
        from ..models.group_spec import GroupSpec  # noqa: PLC0415
        from ..models.run_submit import RunSubmit  # noqa: PLC0415

        runs = []
        for runs_item_data in self.runs:
            runs_item = runs_item_data.to_dict()
            runs.append(runs_item)

        group: dict[str, Any] | None | Unset
        if isinstance(self.group, Unset):
            group = UNSET
        elif isinstance(self.group, GroupSpec):
            group = self.group.to_dict()
        else:
            group = self.group

        field_dict: dict[str, Any] = {}

        field_dict.update(
            {
                "runs": runs,
            }
        )
        if group is not UNSET:
            field_dict["group"] = group

        return field_dict

    @classmethod
    def from_dict(cls: type[T], src_dict: Mapping[str, Any]) -> T:
        from ..models.group_spec import GroupSpec  # noqa: PLC0415
        from ..models.run_submit import RunSubmit  # noqa: PLC0415

        d = dict(src_dict)
        runs = []
        _runs = d.pop("runs")
        for runs_item_data in _runs:
            runs_item = RunSubmit.from_dict(runs_item_data)

            runs.append(runs_item)

        def _parse_group(data: object) -> GroupSpec | None | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            try:
                if not isinstance(data, dict):
                    raise TypeError()
                group_type_0 = GroupSpec.from_dict(data)

                return group_type_0
            except (TypeError, ValueError, AttributeError, KeyError):
                pass
            return cast(GroupSpec | None | Unset, data)

        group = _parse_group(d.pop("group", UNSET))

        run_batch_submit = cls(
            runs=runs,
            group=group,
        )

        return run_batch_submit
