"""Explicit Parquet schemas of the preprocess outputs (the contract every later stage reads).

Layout under `preprocess.out_dir` (default data/processed/):
  stage_one/{train,val,test}.parquet   STAGE_ONE
  stage_two/{train,val,test}.parquet   STAGE_TWO (only examples that mention an entity)
  stats.json                           Table-1 figures per split + skip counts (DVC metric)
"""

import pyarrow as pa

SENT_TOKEN = "<sent>"  # starts every unit of a target (the paper's <s>)
NONE_ENTITY = "<none>"  # entity-planner class for "no entity in this unit"


def placeholder(index: int) -> str:
    """The i-th entity placeholder, numbered by first occurrence: <e0>, <e1>, ..."""
    return f"<e{index}>"


def placeholder_tokens(max_entities: int) -> list[str]:
    return [placeholder(i) for i in range(max_entities)]


SPLITS = ("train", "val", "test")

MENTION = pa.struct([("placeholder", pa.string()), ("mention", pa.string())])

STAGE_ONE = pa.schema(
    [
        ("id", pa.string()),  # story id (corpus id, or title-derived)
        ("title", pa.string()),
        ("source", pa.string()),  # unit 1, not anonymized
        ("target", pa.string()),  # "<sent> unit2 <sent> unit3 ..." with placeholders
        ("units", pa.list_(pa.string())),  # anonymized target units, in order
        # placeholders each unit mentions, in text order WITH repeats (occurrences);
        # the uniform choice of the paper dedupes, the authors' code samples occurrences
        ("unit_entities", pa.list_(pa.list_(pa.string()))),
        ("n_entities", pa.int32()),  # distinct placeholders in the target
        ("mentions", pa.list_(MENTION)),  # every replaced span, in text order (merge step)
    ]
)

STAGE_TWO = pa.schema(
    [
        ("id", pa.string()),
        ("source", pa.string()),  # input + separator + stage-one target
        ("target", pa.string()),  # "<e0> Ash Williams <e1> Linda <e0> Ash"
        ("mentions", pa.list_(MENTION)),
    ]
)
