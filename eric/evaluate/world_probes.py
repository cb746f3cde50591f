"""What a stage-one model knows of a unit's focal character before writing it: probes
(eric/evaluate/state_probe.py) fitted on training units and scored on test units, each
against the training split's majority class (the floor every probe must beat).

Labels of unit n's focal character: its `event` type (drawn at random by the generator, so
the prefix bounds what can be known: eric/evaluate/world_lines.py `oracle_event_probe`), its
`condition_before` and `location_before` the unit (the place's rank among the scene's
places, "place 0" first: place names differ from story to story, ranks do not; both fixed by
the prefix: a model that tracks states can know them) and its `condition` after it.

Probes, each as `<probe>/<label>`:
- predicted, gold (variants with states): majority vote per state id of the predicted state
  (from the prefix: what generation uses) and the gold state (the sentence encoder's, from
  the unit itself);
- hidden: the decoder's last hidden state at the unit's sentence token, in as many k-means
  clusters as the model has states, voted the same way (equal capacity for any model);
- linear: a logistic regression on those hidden states;
- predicted_vector, predicted_state_vector, gold_vector (variants with states): the same
  regression on the predictor's continuous e^_n, on the state it is quantized to, and on the
  sentence encoder's e_n (from the unit itself: the reference);
- entity: the same regression where the decoder has read the focal character's placeholder
  (two-stage models: a one-stage model reads the stories with their names, as it was
  trained, and has no placeholder to stop at);
- identity: no model, the line of knowing only *which* character is planned: the most
  frequent training label per placeholder <ek>, on the same units. <ek> is the k-th
  character of the scene sentence, which lists characters place by place, so k alone tells
  much of where a character starts: a location gain at or below this line is identity.
With states, also `predicted_is_gold` (the predictor's exact hit rate) and `cosines`
(how the predicted vector sits among the states).
"""

from __future__ import annotations

from dataclasses import replace
from functools import lru_cache

from eric.evaluate.state_probe import (
    CosineReader,
    HiddenReader,
    StateReader,
    agreement,
    linear_probe,
    majority_probe,
    quantize_hidden,
    read_units,
)
from eric.evaluate.world_metrics import focal_index, focal_rows, true_labels
from eric.world.phrasings import parse_scene

LABELS = ("event", "condition_before", "location_before", "condition")


def unit_labels(row: dict, n: int) -> dict[str, str] | None:
    """Every label of unit n's focal character (None past the story's events)."""
    if n >= len(row["world_events"]):
        return None
    found, k = true_labels(row, n), focal_index(row, n)
    places, starts = _scene(row["source"])
    before = row["world_states"][n - 1][k] if n else {"condition": "well", "location": starts[k]}
    found["condition_before"] = before["condition"]  # every scene starts well
    found["location_before"] = f"place {places.index(before['location'])}"
    return {name: found[name] for name in LABELS}


@lru_cache(maxsize=64)
def _scene(scene: str) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """(the scene's places in order, each character's starting place): parsed once per story,
    not once per unit."""
    world = parse_scene(scene)
    return tuple(world.places), tuple(c.location for c in world.characters)


def _joined(row: dict, n: int) -> str | None:
    """All labels in one string: one model pass serves the three probes (split by `_relabel`)."""
    labels = unit_labels(row, n)
    return None if labels is None else "|".join(labels[name] for name in LABELS)


def _relabel(pairs, i: int):
    return [replace(u, label=u.label.split("|")[i]) for u in pairs]


def identity_votes(pairs, rows: list[dict]):
    """The same units, each voted by its focal placeholder's index k instead of a state id."""
    return [replace(u, predicted=focal_index(rows[u.text], u.unit)) for u in pairs]


def world_probes(model, tokenizer, collator, train_rows: list[dict], test_rows: list[dict], clusters: int,
                 seed: int = 0, one_stage: bool = False) -> dict:
    """Every probe of every label (module doc); rows are stage-one rows with world columns
    (and `mentions` for a `one_stage` model)."""
    train_rows, test_rows = focal_rows(train_rows), focal_rows(test_rows)
    if one_stage:  # the form the model was trained on (eric/data/one_stage.py)
        from eric.data.one_stage import one_stage_row

        train_rows, test_rows = [one_stage_row(r) for r in train_rows], [one_stage_row(r) for r in test_rows]
    focal = lambda row, n: tokenizer.convert_tokens_to_ids(row["world_focal"][n])  # noqa: E731
    has_states = getattr(model.config, "use_state", False)

    def readers(cosines: bool) -> dict:  # every probe's reads of one split, in one pass of the model
        found = {"linear": HiddenReader(collator.ids.sent, _joined)}
        if not one_stage:
            found["entity"] = HiddenReader(collator.ids.sent, _joined, entity=focal)
        if has_states:
            found["states"] = StateReader(model, _joined)
        if has_states and cosines:
            found["cosines"] = CosineReader(model)
        return found

    train_reads = read_units(model, collator, train_rows, readers(cosines=False))
    test_reads = read_units(model, collator, test_rows, readers(cosines=True))
    vectors = (train_reads["linear"], test_reads["linear"])
    at_entity = (([], None), ([], None)) if one_stage else (train_reads["entity"], test_reads["entity"])
    voted = {"hidden": ("predicted", quantize_hidden(*vectors, clusters, seed=seed)),
             "identity": ("predicted", (identity_votes(vectors[0][0], train_rows),
                                        identity_votes(vectors[1][0], test_rows)))}
    read = {"linear": vectors, "entity": at_entity}
    if has_states:
        (train_states, train_x), (test_states, test_x) = train_reads["states"], test_reads["states"]
        voted.update({"predicted": ("predicted", (train_states, test_states)),
                      "gold": ("gold", (train_states, test_states))})
        read.update({name: ((train_states, train_x[name]), (test_states, test_x[name])) for name in train_x})
    out: dict = {}
    for i, name in enumerate(LABELS):
        for probe, (which, (train, test)) in voted.items():
            out[f"{probe}/{name}"] = majority_probe(_relabel(train, i), _relabel(test, i), which=which).to_dict()
        for probe, ((train, train_x), (test, test_x)) in read.items():
            if len(train) and len(test):  # `entity`: units whose placeholder fits in the target length
                found = linear_probe((_relabel(train, i), train_x), (_relabel(test, i), test_x))
                out[f"{probe}/{name}"] = found.to_dict()
    if has_states:
        out["predicted_is_gold"] = round(agreement(test_states), 4)
        out["cosines"] = test_reads["cosines"]
    return {"train_texts": len(train_rows), "test_texts": len(test_rows), **out}
