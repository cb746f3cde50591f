"""The one error type of the training engine: a bad setting or input, said in one line."""


class TrainError(RuntimeError):
    """Training cannot start or go on (bad config, missing files, mismatched checkpoint)."""
