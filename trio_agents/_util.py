"""Small internal helpers."""

from __future__ import annotations

import trio

__all__ = ["single_failure"]


def single_failure(group: BaseExceptionGroup[BaseException]) -> BaseException | None:
    """What ``group`` stands for when it wraps one failure, else None.

    ``trio.Cancelled`` members are ignored. A group with one real member stands for that member;
    when the member is itself a group, the rule applies again, and a group of several real
    failures is returned as it is (the caller raises it). A group of nothing but cancellations
    stands for its first member.
    """
    real = [e for e in group.exceptions if not isinstance(e, trio.Cancelled)]
    if not real:
        return group.exceptions[0]
    if len(real) > 1:
        return None
    member = real[0]
    if isinstance(member, BaseExceptionGroup):
        return single_failure(member) or member
    return member
