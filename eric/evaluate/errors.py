"""One error type for the evaluator: its message is one line a user can act on."""


class EvaluationError(ValueError):
    """Generations, references or a featurizer cannot be used as given."""
