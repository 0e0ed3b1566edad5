"""Stand-in for the Azure SDK repository's test helpers (not on PyPI): the two names the suite's
test_config.py imports. With the emulator's master key neither is called for a credential."""


def get_credential(**kwargs):
    raise RuntimeError("AAD credentials are not available against partita serve")


def is_live():
    return getattr(is_live, "_cache", False)
