"""Every public class, function, method and property of the package has a docstring.

A public member counts as documented when it, or the member of the same name on a base class of
the package, has a docstring (an override inherits the contract it overrides). Members that come
from Python or a dependency (``Exception.add_note``, ``dict.get``) are not ours to document.
"""

from __future__ import annotations

import enum
import importlib
import inspect
from collections.abc import Iterator
from typing import Any

from tests.test_exports import PUBLIC_NAMESPACES

PACKAGE = "trio_agents"

# Public members of modules being restructured right now, documented when that work lands.
# Empty this list; never add to it.
NOT_YET_DOCUMENTED: frozenset[str] = frozenset()


def _is_ours(obj: Any) -> bool:
    return (getattr(obj, "__module__", None) or "").split(".")[0] == PACKAGE


def _doc_of_member(cls: type, name: str) -> str | None:
    """The first docstring of ``name`` along ``cls``'s MRO, among the package's classes."""
    for base in cls.__mro__:
        if name not in vars(base) or not _is_ours(base):
            continue
        member = vars(base)[name]
        if isinstance(member, (staticmethod, classmethod)):
            member = member.__func__
        doc = getattr(member, "__doc__", None)
        if doc and doc.strip():
            return doc
    return None


def _is_routine(member: Any) -> bool:
    if isinstance(member, (staticmethod, classmethod, property)):
        return True
    return inspect.isfunction(member)


def _public_members(cls: type) -> Iterator[tuple[type, str]]:
    """Each public method or property of ``cls`` with the class that defines it."""
    seen: set[str] = set()
    for base in cls.__mro__:
        if not _is_ours(base):
            continue
        for name, member in vars(base).items():
            if name.startswith("_") or name in seen or not _is_routine(member):
                continue
            seen.add(name)
            yield base, name


def _where(cls: type) -> str:
    return f"{cls.__module__}.{cls.__qualname__}"


def _undocumented() -> set[str]:
    missing: set[str] = set()
    for namespace in PUBLIC_NAMESPACES:
        module = importlib.import_module(namespace)
        for name in module.__all__:
            obj = getattr(module, name)
            where = f"{namespace}.{name}"
            if inspect.isclass(obj) and _is_ours(obj):
                if not (obj.__doc__ or "").strip():
                    missing.add(where)
                if issubclass(obj, enum.Enum):
                    continue
                for owner, member in _public_members(obj):
                    if _doc_of_member(owner, member) is None:
                        missing.add(f"{_where(owner)}.{member}")
            elif inspect.isroutine(obj) and _is_ours(obj) and not (obj.__doc__ or "").strip():
                missing.add(where)
    return missing


def test_every_public_name_has_a_docstring() -> None:
    missing = _undocumented() - NOT_YET_DOCUMENTED
    assert sorted(missing) == []


def test_the_allow_list_only_names_what_is_still_missing() -> None:
    stale = NOT_YET_DOCUMENTED - _undocumented()
    assert sorted(stale) == []


class _Documented:
    """A base of the package (its module is set below)."""

    def hook(self) -> None:
        """Documented once, here."""

    @property
    def value(self) -> int:
        """Documented once, here."""
        return 0


class _Override(_Documented):
    """Overrides without repeating the docstrings, and adds one bare method."""

    def hook(self) -> None:
        pass

    @property
    def value(self) -> int:
        return 1

    def bare(self) -> None:
        pass


_Documented.__module__ = _Override.__module__ = f"{PACKAGE}.fake"


def test_the_walk_accepts_inherited_docstrings_and_names_missing_ones() -> None:
    assert [name for _, name in _public_members(_Override)] == ["hook", "value", "bare"]
    assert _doc_of_member(_Override, "hook") == "Documented once, here."
    assert _doc_of_member(_Override, "value") == "Documented once, here."
    assert _doc_of_member(_Override, "bare") is None
