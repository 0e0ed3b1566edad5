from . import is_live  # noqa: F401
