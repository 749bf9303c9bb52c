"""Small internal helpers."""

from __future__ import annotations

import math

import trio

from ._errors import ConfigurationError

__all__ = ["check_timeout", "without_cancelled"]


def check_timeout(value: object, field: str) -> float | None:
    """``value`` as a deadline in seconds: None, or a finite number > 0.

    Raises:
        ConfigurationError: naming ``field`` and the value (a bool, a string, zero, negative,
            NaN or infinity).
    """
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise ConfigurationError(
            f"{field} must be a number of seconds or None, got {type(value).__name__} {value!r}"
        )
    if not (value > 0 and math.isfinite(value)):
        raise ConfigurationError(f"{field} must be a finite number of seconds > 0, got {value!r}")
    return float(value)


def without_cancelled(group: BaseExceptionGroup[BaseException]) -> BaseException:
    """What a nursery's ``group`` stands for once its ``trio.Cancelled`` members are dropped.

    One real failure stands for itself (nested groups are unwrapped by the same rule); several
    become one flat ``ExceptionGroup`` (``BaseExceptionGroup`` if any is not an ``Exception``) so
    that ``except Exception`` handlers see errors that raced with a cancellation. A group of
    nothing but cancellations is returned as it is, for the caller to re-raise.

    Dropping the cancellations is safe: an error leaving a cancelled scope still ends it.
    """
    real = _real_failures(group)
    if not real:
        return group
    if len(real) == 1:
        return real[0]
    if all(isinstance(e, Exception) for e in real):
        return ExceptionGroup(group.message, [e for e in real if isinstance(e, Exception)])
    return BaseExceptionGroup(group.message, real)


def _real_failures(exc: BaseException) -> list[BaseException]:
    if isinstance(exc, trio.Cancelled):
        return []
    if isinstance(exc, BaseExceptionGroup):
        return [leaf for member in exc.exceptions for leaf in _real_failures(member)]
    return [exc]
