"""The help desk app of :mod:`tests.desk_app` (resumable; a ticket pauses its run)."""

from tests.desk_app import app

__all__ = ["app"]
