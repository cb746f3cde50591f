"""DVC stage `sample@<variant>`: stories from the trained models of one variant.

    python stages/sample.py <variant> [params.yaml]

Stage one (models/stage_one/<variant>) samples each story with placeholders, planning
an entity and a state at every sentence token; stage two (models/mentions) writes the
mentions; the merge puts them in, falling back on the entity's last mention or on a
training name (counted). A one-stage variant (`two_stage: false`: BART and the baselines,
as in the paper) writes the names itself, and the mention model is not loaded. Output:
outputs/samples/<variant>.parquet (eric/generate/schema.py), its metadata recording the
options, models and seed. The body is `eric sample`'s (eric/generate/command.py
`sample_to_file`); this stage picks the variant's folders. A Prefect flow (`stage-sample`).
"""

from __future__ import annotations

from _flow import run_stage, stage_flow, stage_task

from eric.config import Params, ParamsError, load_variant_params, resolve_path
from eric.generate.errors import SampleError


@stage_task
def read_params(params_path: str, variant: str) -> Params:
    return load_variant_params(params_path, variant)


@stage_task
def read_data(params: Params) -> tuple[list, list[str]]:
    """The inputs (with references) and the training names the merge falls back on."""
    from eric.generate.command import training_names
    from eric.generate.inputs import read_inputs

    data = resolve_path(params.preprocess.out_dir) / "stage_one"
    inputs = read_inputs(data / f"{params.sample.split}.parquet", params.sample.num_inputs)
    train = data / "train.parquet"
    if not train.is_file():
        raise SampleError(f"{train}: no training split (run the preprocess stage first)")
    return inputs, training_names(train, params)


@stage_task
def sample(params: Params, variant: str, inputs: list, names: list[str]) -> dict:
    from eric.generate.command import sample_to_file

    path = resolve_path(params.sample.out_dir) / f"{variant}.parquet"
    _, summary = sample_to_file(inputs, path, params, resolve_path(params.train.out_dir) / variant,
                                resolve_path(params.mentions.out_dir), names, variant,
                                metadata={"variant": variant, "split": params.sample.split})
    print(f"{variant}: {summary['stories']} stories, {summary['stage_one_tokens']} stage-one tokens in "
          f"{summary['seconds']:.0f} s ({summary['tokens_per_s']} tokens/s); fallbacks: {summary['reused_last']} "
          f"reused, {summary['random_name']} random names of {summary['occurrences']} placeholders -> {path}")
    return summary


@stage_flow("sample")
def run(variant: str, params_path: str = "params.yaml") -> dict:
    params = read_params(params_path, variant)
    inputs, names = read_data(params)
    return sample(params, variant, inputs, names)


if __name__ == "__main__":
    run_stage(run, ParamsError, SampleError)  # argv: <variant> [params.yaml]
