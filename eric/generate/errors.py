"""One error type for sampling: its message is one line a user can act on."""


class SampleError(ValueError):
    """A model, tokenizer or input file cannot be used as given."""
