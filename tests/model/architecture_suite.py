"""What every stage-one architecture must pass, as one mixin (transformers' model tests do the same).

    class TestSimCTGArchitecture(ArchitectureTests):
        kind = "simctg"
        options = {"margin": 0.25}
        invalid_options = ({"margin": -1},)

        def tiny(self, seed=0, **overrides):
            return tiny_simctg(seed, **overrides)

A subclass declares what differs (the class attributes and hooks below); the tests run for
every subclass whose name starts with `Test`. `tests/model/test_architecture_suite.py` fails
when a kind of `eric.model.registry.builtin_kinds()` has no subclass, so a new baseline cannot skip it.
"""

from __future__ import annotations

import dataclasses

import pytest
import torch
from transformers import AutoConfig

from eric.config import ModelParams, VariantParams
from eric.data.tokenizer import SpecialTokenIds
from eric.model.registry import architecture, architecture_of
from eric.model.variants import build_config
from eric.train.meters import loss_terms
from tests.model.baselines import sample_with_and_without_cache, sample_with_each_decode_step
from tests.pins import check_pinned, one_thread
from tests.model.conftest import ENTITIES, SENT, make_batch, tiny_model

BART_SWITCHES = dict(use_state=False, use_entity=False, use_state_attention=False)
IDS = SpecialTokenIds(bos=0, eos=2, pad=1, sent=SENT, entities=ENTITIES + list(range(11, 106)))
SWITCH_FIELDS = {"state_attention": "use_state_attention", "state": "use_state", "entity": "use_entity"}


class ArchitectureTests:
    """The shared tests; not collected itself (no `Test` prefix), only through its subclasses."""

    kind: str  # the registry name (eric.model.registry.builtin_kinds())
    variant: dict = {}  # other `model.variants` fields of the variant built from params (ERIC's switches)
    options: dict = {}  # an `options` example (non-default values), set on the built and saved configs
    option_defaults: dict = {}  # options left out of `options` and the values they default to
    invalid_options: tuple[dict, ...] = ()  # {option: invalid value} each; the error names the option
    # names, or prefixes ending in ".", of the parameters the architecture adds to a plain BART of the same
    # dimensions: every added parameter matches one, and each matches at least one added parameter
    added_parameters: tuple[str, ...] = ()
    round_trip_overrides: tuple[dict, ...] = ({},)  # config overrides each saved and loaded (on top of options)
    unlabeled_losses: tuple[str, ...] = ()  # loss terms a forward without labels still gives (from its inputs)

    def tiny(self, seed: int = 0, **overrides):
        """A tiny model at conftest's dimensions (overrides: config fields, options included)."""
        raise NotImplementedError

    def batch(self) -> dict:
        return make_batch()

    def extras(self, model, batch: dict) -> dict:
        """Extra forward inputs a training batch carries for this architecture (a collator's extras)."""
        return {}

    def unlabeled_inputs(self, batch: dict) -> dict:
        """Inputs beyond the source and the decoder's tokens that a forward without labels needs."""
        return {}

    def sampling_model(self):
        """The model sampled with and without the KV cache (in eval mode); <sent> is nudged so that
        sampled texts open units."""
        model = self.tiny().eval()
        with torch.no_grad():
            model.final_logits_bias[0, SENT] = 0.2
        return model

    # -- the shared tests ----------------------------------------------------------------------

    def test_the_registry_names_the_class_and_its_config(self):
        cls = architecture(self.kind)
        model = self.tiny()
        assert type(model) is cls and type(model.config) is cls.config_class

    def test_builds_from_params_with_its_options(self):
        name = f"v_{self.kind}"
        spec = {"kind": self.kind, **self.variant, **({"options": self.options} if self.options else {})}
        config = build_config(ModelParams(variants={name: spec}), name, 200, IDS)
        cls = architecture(self.kind)
        assert type(config) is cls.config_class and config.variant == name
        for key, value in self.options.items():
            assert getattr(config, key) == value, key
        assert not set(self.option_defaults) & set(self.options)
        for key, value in self.option_defaults.items():
            assert getattr(config, key) == value, key
        options_model = cls.config_class.options_model
        defaults = options_model().model_dump() if options_model else {}
        for key, value in defaults.items():  # every option not given keeps its options_model default
            if key not in self.options:
                assert getattr(config, key) == value, key
        switches = VariantParams(**spec)
        assert {f: getattr(config, f) for f in SWITCH_FIELDS.values()} == {
            f: getattr(switches, s) for s, f in SWITCH_FIELDS.items()}
        if self.kind != "eric":  # a baseline keeps no ERIC mechanism
            assert not (config.use_state or config.use_entity or config.use_state_attention)
        with torch.device("meta"):
            assert type(cls(config)) is cls

    def test_an_invalid_option_value_or_an_unknown_option_fails(self):
        cases = [*self.invalid_options, {"no_such_option": 1}]
        for options in cases:
            key = next(iter(options))
            match = "options are for" if self.kind == "eric" else key if options in self.invalid_options else "extra"
            with pytest.raises(ValueError, match=match):
                params = ModelParams(variants={"v": {"kind": self.kind, **self.variant, "options": options}})
                build_config(params, "v", 200, IDS)

    def test_save_load_round_trip_through_the_registry(self, tmp_path):
        for i, overrides in enumerate(self.round_trip_overrides):
            folder = tmp_path / str(i)
            model = self.tiny(**{**self.options, **overrides})
            with torch.no_grad():  # nothing may come back at its initial value
                model.final_logits_bias.normal_()
                for p in model.parameters():
                    p.add_(torch.randn_like(p) * 0.01)
            model.eval()
            model.save_pretrained(folder)
            assert (folder / "model.safetensors").is_file()
            cls = architecture_of(folder)
            assert cls is type(model) is architecture(self.kind)
            assert type(AutoConfig.from_pretrained(folder)) is cls.config_class
            loaded = cls.from_pretrained(folder).eval()
            assert type(loaded) is cls
            strip = lambda c: {k: v for k, v in c.to_dict().items() if k != "_name_or_path"}  # noqa: E731
            assert strip(loaded.config) == strip(model.config)
            for key, value in {**self.options, **overrides}.items():
                assert getattr(loaded.config, key) == value, key
            ours, theirs = model.state_dict(), loaded.state_dict()
            assert ours.keys() == theirs.keys()
            assert not [k for k in ours if not torch.equal(ours[k], theirs[k])]
            buffers = dict(loaded.named_buffers())  # the non-persistent ones too
            assert all(torch.equal(b, buffers[n]) for n, b in model.named_buffers())
            batch = self.batch()
            a, b = model(**batch, **self.extras(model, batch)), loaded(**batch, **self.extras(loaded, batch))
            assert a.loss is not None and torch.equal(a.logits, b.logits) and torch.equal(a.loss, b.loss)
            kwargs = dict(max_new_tokens=12, top_p=0.9)
            x, y = (m.generate(batch["input_ids"], batch["attention_mask"], generator=torch.Generator().manual_seed(0),
                               **kwargs) for m in (model, loaded))
            _assert_same_outputs(x, y)

    def test_sampling_with_and_without_the_kv_cache_gives_the_same_tokens(self):
        model, batch = self.sampling_model(), make_batch(rows=2)
        for kwargs in (dict(do_sample=True, top_p=0.9), dict(do_sample=False)):
            cached, full = sample_with_and_without_cache(model, batch, max_new_tokens=20, **kwargs)
            assert cached.sequences.shape[1] > 3  # more than the forced </s> <s> <sent>
            _assert_same_outputs(cached, full)

    def test_the_static_decoding_step_samples_the_same_tokens_as_the_dynamic_one(self):
        model, batch = self.sampling_model(), make_batch(rows=2)
        for kwargs in (dict(do_sample=True, top_p=0.9), dict(do_sample=False)):
            dynamic, static = sample_with_each_decode_step(model, batch, max_new_tokens=20, **kwargs)
            assert static.sequences.shape[1] > 3
            _assert_same_outputs(dynamic, static)

    def test_training_losses_and_samples_are_pinned(self):
        """The training forward's loss terms and seeded samples, as recorded (tests/pins.py)."""
        model, batch = self.tiny(), self.batch()
        model.train()
        with one_thread():
            torch.manual_seed(0)  # the training forward's own draws (dropout is 0; Gumbel noise, etc.)
            out = model(**batch, **self.extras(model, batch))
            if hasattr(model, "finish_output"):  # what a logged training row adds
                model.finish_output(out, logged=True)
            terms = loss_terms(out)
            sampler = self.sampling_model()
            samples = {name: _int_fields(sampler.generate(batch["input_ids"], batch["attention_mask"], max_new_tokens=12,
                                                          generator=torch.Generator().manual_seed(3), **kwargs))
                       for name, kwargs in (("top_p", dict(do_sample=True, top_p=0.9)),
                                            ("greedy", dict(do_sample=False)))}
        check_pinned(f"architecture/{type(self).__name__}", {"loss_terms": terms, "samples": samples})

    def test_it_adds_exactly_its_declared_modules_to_bart(self):
        model, bart = self.tiny(), tiny_model(**BART_SWITCHES)
        ours, theirs = _names(model), _names(bart)
        assert theirs <= ours  # every BART weight is there, under BART's name (init from BART loads it)
        added = ours - theirs
        matches = lambda name, p: name.startswith(p) if p.endswith(".") else name == p  # noqa: E731
        assert added == {n for n in ours if any(matches(n, p) for p in self.added_parameters)}
        assert all(any(matches(n, p) for n in added) for p in self.added_parameters)
        # init-from-BART initializes fresh exactly the names with a `new_modules` part
        new_modules = type(model).new_modules
        assert all(any(part in n for part in new_modules) for n in added)
        assert not any(part in n for n in theirs for part in new_modules)

    def test_forward_without_labels_gives_logits_and_no_loss(self):
        model, batch = self.tiny().eval(), self.batch()
        decoder_input_ids = batch["labels"].clamp(min=1)
        out = model(input_ids=batch["input_ids"], attention_mask=batch["attention_mask"],
                    decoder_input_ids=decoder_input_ids, **self.unlabeled_inputs(batch))
        assert out.logits.shape == (*decoder_input_ids.shape, model.config.vocab_size)
        assert torch.isfinite(out.logits).all()
        losses = {f.name: getattr(out, f.name) for f in dataclasses.fields(out) if f.name.endswith("loss")}
        assert {"loss", "lm_loss"} <= set(losses) and set(self.unlabeled_losses) <= set(losses)
        assert all(v is None for k, v in losses.items() if k not in self.unlabeled_losses), losses
        assert all(losses[k] is not None for k in self.unlabeled_losses), losses


def _int_fields(output) -> dict[str, list[str]]:
    """Every integer tensor of a generation output (tokens; ERIC's entities and states), one
    space-separated line per row."""
    rows = lambda t: [" ".join(map(str, r)) for r in t.reshape(t.shape[0], -1).tolist()]  # noqa: E731
    return {f.name: rows(v) for f in dataclasses.fields(output)
            if isinstance(v := getattr(output, f.name), torch.Tensor) and not v.is_floating_point()}


def _names(model) -> set[str]:
    return {n for n, _ in model.named_parameters()}


def _assert_same_outputs(a, b) -> None:
    """Every tensor field of two generation outputs is equal (sequences, entities, states, codes)."""
    fields = [f.name for f in dataclasses.fields(a)]
    assert "sequences" in fields
    for name in fields:
        x, y = getattr(a, name), getattr(b, name)
        assert (x is None) == (y is None), name
        if isinstance(x, torch.Tensor):
            assert torch.equal(x, y), name
