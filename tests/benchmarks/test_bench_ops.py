"""benchmarks/bench_ops.py: operators per training step, split into what the architecture fixes
(parameter tensors, matrix products) and what the code adds."""

from __future__ import annotations

import json
import sys
from types import SimpleNamespace

import torch
from torch import nn

from eric.config import PROJECT_ROOT

sys.path.insert(0, str(PROJECT_ROOT / "benchmarks"))
import bench_ops  # noqa: E402


def test_counts_are_recorded_and_the_matrix_products_follow_the_layers(tmp_path):
    results = bench_ops.main(["--sizes", "tiny", "--out-dir", str(tmp_path)])
    recorded = json.loads((tmp_path / "bench_ops.json").read_text())["result"]
    tiny = results["tiny"]
    assert recorded["tiny_eric_ops"] == tiny["eric"]["ops"] and recorded["tiny_bart_param_tensors"] > 0
    for name in ("eric", "bart"):
        figures = tiny[name]
        assert figures["ops"] > figures["kernel_ops"] > figures["matmul_ops"] > 0
    bart = bench_ops.build("bart", "tiny", 512)
    linears = sum(isinstance(m, nn.Linear) for m in bart.modules())
    c = bart.config
    attention_calls = c.encoder_layers + 2 * c.decoder_layers  # self-attention, and the decoder's cross-attention
    # a linear: its product, and two in backward (input and weight gradients); an attention call: forward, backward
    assert tiny["bart"]["matmul_ops"] == 3 * linears + 2 * attention_calls
    eric = bench_ops.build("eric", "tiny", 512)
    assert tiny["eric"]["param_tensors"] == sum(1 for _ in eric.parameters())
    assert tiny["eric"]["matmul_ops"] >= 3 * sum(isinstance(m, nn.Linear) for m in eric.modules())
    ratio = tiny["ratio"]
    assert ratio["param_tensors"] > 1.5  # the sentence encoder and the state layers: more than the 1.5 x allowed
    assert ratio["ops"] == round(tiny["eric"]["ops"] / tiny["bart"]["ops"], 3)


class TwoLayers(nn.Module):
    def __init__(self):
        super().__init__()
        self.first, self.second = nn.Linear(8, 16), nn.Linear(16, 8)

    def forward(self, x):
        return SimpleNamespace(loss=self.second(torch.nn.functional.gelu(self.first(x))).pow(2).mean())


def test_a_compiled_step_is_counted_in_generated_kernels_and_matrix_products():
    torch.manual_seed(0)
    fused, matmuls = bench_ops.compiled_kernels(TwoLayers(), {"x": torch.randn(4, 8)})
    # forward: two products; backward: the second layer's input and weight gradients, the first's weight gradient
    assert matmuls == 5
    assert fused >= 2  # at least the forward's and the backward's pointwise work, each fused into kernels
