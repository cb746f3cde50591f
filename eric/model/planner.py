"""The entity input and the entity state update module (which entity next, in which state).

`EntityInput`: E(p_n), added at the n-th sentence token (zero for <none>).

`EntityPlanner`: P(p_n) = softmax(W q_{n-1} + b) over <none> + the placeholders,
where q_{n-1} is the mean last-layer decoder state of unit n-1.

`StatePredictor`: e^_n = normalize(Attn(Q = q_{n-1} + E(p_n), K/V = the last-layer
states before the n-th sentence token)), in the state dimension D; the attention logits are
q.k as in the authors' code, or q.k / sqrt(D) with `scaled` (`predictor_scale: sqrt_d`). Quantizing e^_n
to the state space gives the state used at generation time. In the paper the query only
weighs the prefix: what e^_n says is a mix of the prefix's values, so the planned entity
reaches it only through where it attends. `residual=True` adds a projection of the query
itself (W_r (q_{n-1} + E(p_n))), as every transformer block's residual does, so the entity
and the previous unit reach e^_n directly (docs/state-space.md, "Why L_CL stayed at chance").
`blind=True` (`predictor_input: none`) is a control, not a predictor: e^_n is one learned
vector whatever the prefix and the entity, so L_CL measures what the sentence encoder can
rank alone (docs/state-predictor.md, the anchor-blind line).
"""

from __future__ import annotations

import torch
from torch import nn
from torch.nn import functional as F


class EntityInput(nn.Module):
    """E(p_n): the token embedding of the placeholder, zero for <none> (class 0)."""

    def __init__(self, entity_token_ids: list[int]):
        super().__init__()
        self.register_buffer("token_ids", self.table(entity_token_ids), persistent=False)

    @staticmethod
    def table(entity_token_ids: list[int]) -> torch.Tensor:
        return torch.tensor([0, *entity_token_ids], dtype=torch.long)  # row 0 (<none>) is masked

    def forward(self, classes: torch.Tensor, embed_tokens: nn.Module) -> torch.Tensor:
        embeds = embed_tokens(self.token_ids[classes.clamp(min=0)])
        return embeds * (classes > 0)[..., None].to(embeds.dtype)


class EntityPlanner(nn.Module):
    def __init__(self, d_model: int, num_classes: int):
        super().__init__()
        self.head = nn.Linear(d_model, num_classes)

    def forward(self, context: torch.Tensor) -> torch.Tensor:
        """Logits over the entity classes (0 = <none>) from q_{n-1}."""
        return self.head(context)


class StatePredictor(nn.Module):
    def __init__(self, d_model: int, state_dim: int, num_heads: int = 1, residual: bool = False,
                 scaled: bool = False, blind: bool = False):
        super().__init__()
        self.constant = nn.Parameter(torch.randn(state_dim) * 0.02) if blind else None
        self.num_heads = num_heads
        self.scale = None if scaled else 1.0  # None: SDPA's 1/sqrt(head dim); 1.0: the authors' unscaled q.k
        self.head_dim = state_dim // num_heads
        self.q_proj = nn.Linear(d_model, state_dim)
        self.k_proj = nn.Linear(d_model, state_dim)
        self.v_proj = nn.Linear(d_model, state_dim)
        self.out_proj = nn.Linear(state_dim, state_dim)
        self.query_proj = nn.Linear(d_model, state_dim) if residual else None

    def memory(self, hidden: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Keys and values of decoder states [B, T, d] (cached step by step at generation)."""
        return self.k_proj(hidden), self.v_proj(hidden)

    def forward(
        self, query: torch.Tensor, keys: torch.Tensor, values: torch.Tensor, visible: torch.Tensor | None
    ) -> torch.Tensor:
        """query [B, N, d] (q_{n-1} + E(p_n)); keys/values [B, T, D]; visible [B, N, T] -> e^ [B, N, D].

        visible None: every key is visible (a generation step), so no mask is built."""
        q = self._heads(self.q_proj(query))
        bias = None
        if visible is not None:
            bias = torch.zeros(visible.shape, dtype=q.dtype, device=q.device)
            bias = bias.masked_fill(~visible, torch.finfo(q.dtype).min)[:, None]
        if keys.dtype != q.dtype:
            keys, values = keys.to(q.dtype), values.to(q.dtype)
        out = F.scaled_dot_product_attention(q, self._heads(keys), self._heads(values), bias, scale=self.scale)
        if self.num_heads == 1:
            out = out.squeeze(1)
        else:
            out = out.transpose(1, 2).reshape(*query.shape[:-1], -1)
        out = self.out_proj(out)
        if self.query_proj is not None:
            out = out + self.query_proj(query).to(out.dtype)
        if self.constant is not None:  # blind: the read is zeroed, not skipped (every weight keeps a gradient)
            out = out * 0 + self.constant.to(out.dtype)
        return F.normalize(out, dim=-1)

    def _heads(self, x: torch.Tensor) -> torch.Tensor:
        """[B, T, H * Dh] -> [B, H, T, Dh]; one head (the paper's setting): a view, no transpose."""
        if self.num_heads == 1:
            return x.unsqueeze(1)
        return x.view(*x.shape[:-1], self.num_heads, self.head_dim).transpose(1, 2)
