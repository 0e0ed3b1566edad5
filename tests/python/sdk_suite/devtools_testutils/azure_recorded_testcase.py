from . import get_credential  # noqa: F401
