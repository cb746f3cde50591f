"""`without_lm_head`: the passes that read decoder states and entity states (coherence scoring,
the probes) skip the vocabulary projection, for ERIC and every baseline, and read the same
states a full forward does."""

import pytest
import torch

from tests.model.conftest import make_batch, tiny_model
from tests.model.test_discodvt import dvt_batch, tiny_dvt
from tests.model.test_hint import tiny_hint
from tests.model.test_plan_ahead import tiny_plan_ahead
from tests.model.test_simctg import tiny_simctg

MODELS = {"eric": (tiny_model, make_batch), "simctg": (tiny_simctg, make_batch), "hint": (tiny_hint, make_batch),
          "discodvt": (tiny_dvt, dvt_batch), "plan_ahead": (tiny_plan_ahead, make_batch)}


@pytest.mark.parametrize("kind", sorted(MODELS))
def test_the_head_is_skipped_and_the_states_are_a_full_forwards(kind):
    build, batch_of = MODELS[kind]
    model, batch = build().eval(), batch_of()
    calls = []
    model.lm_head.register_forward_hook(lambda *_: calls.append(1))
    with torch.no_grad():
        full = model(**batch)
        assert calls and full.loss is not None
        calls.clear()
        with model.without_lm_head():
            read = model(**batch)
        assert not calls  # the vocabulary projection never ran
        assert read.logits.shape[-1] == 0 and read.loss is None and read.lm_loss is None
        torch.testing.assert_close(read.decoder_last_hidden_state, full.decoder_last_hidden_state)
        for states in ("state_ids", "predicted_state_ids", "predicted_events"):
            if getattr(full, states, None) is not None:
                torch.testing.assert_close(getattr(read, states), getattr(full, states))
        again = model(**batch)  # the switch is back off after the block
    assert calls and again.logits.shape[-1] == model.config.vocab_size
    torch.testing.assert_close(again.loss, full.loss)
