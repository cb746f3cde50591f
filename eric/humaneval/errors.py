"""One error type for human evaluation: its message is one line a user can act on."""


class HumanEvalError(ValueError):
    """A system, key or answers file cannot be used as given."""
