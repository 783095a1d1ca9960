"""User-facing errors: the CLI prints these as one line and exits non-zero."""


class FedprefError(Exception):
    """A mistake in the user's input (config, data, paths), not a bug."""


class ConfigError(FedprefError):
    """A config key is unknown, has the wrong type or an impossible value."""


class DataError(FedprefError):
    """Preference data is malformed, missing fields or too small to split."""
