"""Positions and attention variants, checked against the handouts' formulas written out independently here.

- rope (2024 handout): R_t = blockdiag([[cos t th_i, -sin t th_i], [sin t th_i, cos t th_i]]), th_i = 10000^(-2(i-1)/d),
  on ADJACENT pairs, applied to queries and keys of every head in every layer, never to values.
- sinusoidal: Phi(t, 2i) = sin(t / 10000^(2i/d)), Phi(t, 2i+1) = cos(t / 10000^(2i/d)), added to token embeddings.
- none: without positions, one attention+MLP block commutes with permutations of its input rows when nothing is
  masked (Z_perm = P Z); the causal mask breaks this, since row t sees rows <= t, so order matters again.
- synthesizer (2022 handout): per head, ReLU(X A_i + b1) B + b2, causally masked, softmax, times X V_i.
- alibi (Press et al., 2022): no position vectors; head i's score of key s from query t is lowered by m_i (t - s),
  m_i = 2^(-8 i / H) for H heads a power of two.
"""

import math
import os

os.environ.setdefault("HF_HUB_OFFLINE", "1")

import pytest
import torch

from modeling_chargpt import CharGPTConfig, CharGPTForCausalLM, CharTokenizer
from modeling_chargpt.answering import question_problem
from modeling_chargpt.positions import (
    POSITION_ENCODINGS,
    PositionEncoding,
    alibi_slopes,
    apply_rope,
    rope_cos_sin,
    sinusoidal_positions,
)


def tiny_model(position_embedding_type="learned", attention_type="causal", seed=0, **kwargs) -> CharGPTForCausalLM:
    kwargs = {"vocab_size": 40, "block_size": 32, "n_layer": 2, "n_head": 4, "n_embd": 64, **kwargs}
    torch.manual_seed(seed)
    cfg = CharGPTConfig(
        position_embedding_type=position_embedding_type, attention_type=attention_type,
        embd_pdrop=0.0, resid_pdrop=0.0, attn_pdrop=0.0, **kwargs,
    )
    model = CharGPTForCausalLM(cfg).eval()
    with torch.no_grad():
        # Make every parameter matter: sharp attention (unit-scale q and k, so positions change the scores),
        # non-zero positions, LayerNorm affine, biases. At the 0.02 init, attention is nearly uniform.
        for name, p in model.named_parameters():
            if name.endswith("pos_emb") or name.endswith("bias") or "b2" in name:
                p.normal_(0.0, 0.3)
            elif ".ln" in name and name.endswith("weight"):
                p.normal_(1.0, 0.2)
            elif p.dim() == 2:
                p.normal_(0.0, 1.0 / math.sqrt(p.shape[1]))
    return model


# ----------------------------------------------------------------------------------------------------------------
# handout formulas, written independently of the model code


def handout_theta(d: int) -> list[float]:
    return [10000.0 ** (-2 * (i - 1) / d) for i in range(1, d // 2 + 1)]


def handout_rotation_matrix(t: int, d: int) -> torch.Tensor:
    """Equation 3 of the 2024 handout: block-diagonal 2x2 rotations by t * theta_i."""
    R = torch.zeros(d, d, dtype=torch.float64)
    for i, theta in enumerate(handout_theta(d)):
        c, s = math.cos(t * theta), math.sin(t * theta)
        R[2 * i, 2 * i], R[2 * i, 2 * i + 1] = c, -s
        R[2 * i + 1, 2 * i], R[2 * i + 1, 2 * i + 1] = s, c
    return R


def handout_sinusoidal(t: int, d: int) -> torch.Tensor:
    row = torch.zeros(d, dtype=torch.float64)
    for i in range(d // 2):
        row[2 * i] = math.sin(t / 10000 ** (2 * i / d))
        row[2 * i + 1] = math.cos(t / 10000 ** (2 * i / d))
    return row


def paper_alibi_slopes(n_head: int) -> list[float]:
    """The paper's slopes for a power-of-two number of heads: the geometric sequence from 2^(-8/H) to 2^(-8)."""
    return [2.0 ** (-8 * i / n_head) for i in range(1, n_head + 1)]


def layer_norm(x, w, b, eps=1e-5):
    mu = x.mean(-1, keepdim=True)
    var = ((x - mu) ** 2).mean(-1, keepdim=True)
    return (x - mu) / torch.sqrt(var + eps) * w + b


def gelu(x):
    return 0.5 * x * (1.0 + torch.erf(x / math.sqrt(2.0)))


def reference_logits(model: CharGPTForCausalLM, ids: torch.Tensor) -> torch.Tensor:
    """The whole model for one sequence, in float64, from its state_dict and the formulas above."""
    cfg = model.config
    sd = {k: v.double() for k, v in model.state_dict().items()}
    (T,) = ids.shape
    C, H = cfg.n_embd, cfg.n_head
    d = C // H
    x = sd["transformer.tok_emb.weight"][ids]
    if cfg.position_embedding_type == "learned":
        x = x + sd["transformer.pos_emb"][0, :T]
    elif cfg.position_embedding_type == "sinusoidal":
        x = x + torch.stack([handout_sinusoidal(t, C) for t in range(T)])
    rotations = [handout_rotation_matrix(t, d) for t in range(T)]
    for layer in range(cfg.n_layer):
        p = f"transformer.blocks.{layer}."
        h = layer_norm(x, sd[p + "ln1.weight"], sd[p + "ln1.bias"])
        heads = []
        if cfg.attention_type == "causal":
            W, bias = sd[p + "attn.qkv.weight"], sd[p + "attn.qkv.bias"]
            Wq, Wk, Wv = W[:C], W[C : 2 * C], W[2 * C :]
            bq, bk, bv = bias[:C], bias[C : 2 * C], bias[2 * C :]
            for i in range(H):
                sl = slice(i * d, (i + 1) * d)
                q = h @ Wq[sl].T + bq[sl]
                k = h @ Wk[sl].T + bk[sl]
                v = h @ Wv[sl].T + bv[sl]  # values are never rotated
                if cfg.position_embedding_type == "rope":
                    q = torch.stack([rotations[t] @ q[t] for t in range(T)])
                    k = torch.stack([rotations[t] @ k[t] for t in range(T)])
                scores = q @ k.T / math.sqrt(d)
                if cfg.position_embedding_type == "alibi":
                    t = torch.arange(T, dtype=torch.float64)
                    scores = scores - paper_alibi_slopes(H)[i] * (t[:, None] - t[None, :])
                scores = scores.masked_fill(torch.ones(T, T).tril() == 0, float("-inf"))
                heads.append(torch.softmax(scores, -1) @ v)
        else:
            W1, b1 = sd[p + "attn.w1.weight"], sd[p + "attn.w1.bias"]
            Wv, bv = sd[p + "attn.value.weight"], sd[p + "attn.value.bias"]
            B, b2 = sd[p + "attn.w2"][:, :T], sd[p + "attn.b2"][:T]
            for i in range(H):
                sl = slice(i * d, (i + 1) * d)
                A_i = W1[sl].T  # (C, d)
                scores = torch.relu(h @ A_i + b1[sl]) @ B + b2
                scores = scores.masked_fill(torch.ones(T, T).tril() == 0, float("-inf"))
                heads.append(torch.softmax(scores, -1) @ (h @ Wv[sl].T + bv[sl]))
        y = torch.cat(heads, -1)
        x = x + y @ sd[p + "attn.proj.weight"].T + sd[p + "attn.proj.bias"]
        h = layer_norm(x, sd[p + "ln2.weight"], sd[p + "ln2.bias"])
        h = gelu(h @ sd[p + "mlp.0.weight"].T + sd[p + "mlp.0.bias"])
        x = x + h @ sd[p + "mlp.2.weight"].T + sd[p + "mlp.2.bias"]
    x = layer_norm(x, sd["transformer.ln_f.weight"], sd["transformer.ln_f.bias"])
    return x @ sd["lm_head.weight"].T


# ----------------------------------------------------------------------------------------------------------------


def test_rope_equals_the_handouts_block_diagonal_rotation():
    d, T = 16, 40
    x = torch.randn(2, 3, T, d, dtype=torch.float64)  # (batch, heads, time, head_dim)
    position_ids = torch.arange(T).expand(2, T)
    cos, sin = rope_cos_sin(position_ids, d, 10000.0)
    rotated = apply_rope(x.float(), cos, sin).double()
    expected = torch.stack([x[:, :, t] @ handout_rotation_matrix(t, d).T for t in range(T)], dim=2)
    torch.testing.assert_close(rotated, expected, rtol=0, atol=1e-5)
    # ADJACENT pairs: rotating (x1, x2) of a vector whose only non-zero entry is x1 touches only x2
    e1 = torch.zeros(1, 1, 2, d)
    e1[..., 0] = 1.0
    out = apply_rope(e1, *rope_cos_sin(torch.tensor([[0, 1]]), d, 10000.0))[0, 0, 1]
    assert out[0] == pytest.approx(math.cos(1.0)) and out[1] == pytest.approx(math.sin(1.0))
    assert torch.count_nonzero(out[2:]) == 0
    # position 0 is the identity
    torch.testing.assert_close(apply_rope(x.float(), cos, sin)[:, :, 0], x[:, :, 0].float())


def test_rope_scores_depend_only_on_relative_position():
    d = 32
    torch.manual_seed(1)
    q, k = torch.randn(d), torch.randn(d)

    def score(t1: int, t2: int) -> float:
        pos = torch.tensor([[t1, t2]])
        cos, sin = rope_cos_sin(pos, d, 10000.0)
        both = apply_rope(torch.stack([q, k])[None, None].double().float(), cos, sin)[0, 0]
        return float(both[0] @ both[1])

    for delta in (0, 1, 5, -3):
        values = [score(t1, t1 - delta) for t1 in (3, 10, 25, 60)]
        assert max(values) - min(values) < 1e-4, (delta, values)
    assert abs(score(10, 9) - score(10, 4)) > 1e-3  # and it does depend on t1 - t2
    assert abs(score(10, 9) - float(q @ k)) > 1e-3


def test_sinusoidal_table_is_the_formula():
    d, T = 64, 50
    table = sinusoidal_positions(torch.arange(T)[None], d)[0].double()
    expected = torch.stack([handout_sinusoidal(t, d) for t in range(T)])
    torch.testing.assert_close(table, expected, rtol=0, atol=1e-5)
    assert table[0, 0] == 0.0 and table[0, 1] == 1.0


@pytest.mark.parametrize(
    ("position_embedding_type", "attention_type"),
    [("learned", "causal"), ("rope", "causal"), ("sinusoidal", "causal"), ("none", "causal"), ("alibi", "causal"),
     ("learned", "synthesizer")],
)
def test_whole_model_matches_the_handout_formulas(position_embedding_type, attention_type):
    model = tiny_model(position_embedding_type, attention_type)
    ids = torch.randint(2, 40, (2, 20))
    logits = model(ids).logits.double()
    for b in range(2):
        expected = reference_logits(model, ids[b])
        assert expected.std() > 0.1  # a meaningful comparison
        torch.testing.assert_close(logits[b], expected, rtol=0, atol=2e-5)


def test_rope_reference_catches_rotated_values_and_missing_layers():
    """The comparison above is sharp enough: a model rotating values too, or skipping a layer, disagrees."""
    model = tiny_model("rope")
    ids = torch.randint(2, 40, (20,))
    expected = reference_logits(model, ids)
    attn = model.transformer.blocks[1].attn
    rotating = attn.forward
    attn.forward = lambda x, mask, rotation, *rest: rotating(x, mask, None, *rest)  # layer 1 skips the rotation
    assert (model(ids[None]).logits[0].double() - expected).abs().max() > 1e-3
    del attn.forward
    torch.testing.assert_close(model(ids[None]).logits[0].double(), expected, rtol=0, atol=2e-5)


def test_sinusoidal_positions_are_not_learned():
    model = tiny_model("sinusoidal")
    assert not any("pos" in name for name, _ in model.named_parameters())
    assert not any("pos" in name for name in model.state_dict())
    none_model = tiny_model("none")
    assert sum(p.numel() for p in model.parameters()) == sum(p.numel() for p in none_model.parameters())


def test_no_positions_block_commutes_with_permutations_only_without_the_causal_mask():
    model = tiny_model("none")
    block = model.transformer.blocks[0]
    T, C = 12, 64
    torch.manual_seed(3)
    X = torch.randn(1, T, C)
    perm = torch.randperm(T)
    assert not torch.equal(perm, torch.arange(T))
    position_ids = torch.arange(T)[None]
    no_mask = torch.ones(1, 1, T, T, dtype=torch.bool)  # everything attends to everything
    with torch.no_grad():
        Z = block(X, no_mask, None, position_ids, None)
        Z_perm = block(X[:, perm], no_mask, None, position_ids, None)
        torch.testing.assert_close(Z_perm, Z[:, perm], rtol=0, atol=1e-5)  # Z_perm = P Z
        # the causal mask (the default) breaks it: row t only sees rows <= t, which a permutation changes
        Zc = block(X, None, None, position_ids, None)
        Zc_perm = block(X[:, perm], None, None, position_ids, None)
        assert (Zc_perm - Zc[:, perm]).abs().max() > 1e-2
    # the same holds for the whole model given an all-True 4D attention mask
    ids = torch.randint(2, 40, (1, T))
    logits = model(ids, attention_mask=no_mask).logits
    torch.testing.assert_close(model(ids[:, perm], attention_mask=no_mask).logits, logits[:, perm], rtol=0, atol=1e-5)
    assert (model(ids[:, perm]).logits - model(ids).logits[:, perm]).abs().max() > 1e-2
    # and positions (learned here) break it even without the mask
    learned = tiny_model("learned")
    full = learned(ids, attention_mask=no_mask).logits
    assert (learned(ids[:, perm], attention_mask=no_mask).logits - full[:, perm]).abs().max() > 1e-2


def test_synthesizer_incremental_decoding_with_cache_matches_full_forward():
    model = tiny_model("learned", "synthesizer")
    ids = torch.randint(2, 40, (2, 16))
    full = model(ids, use_cache=False).logits
    out = model(ids[:, :9], use_cache=True)
    steps = [out.logits]
    cache = out.past_key_values
    for t in range(9, 16):
        out = model(ids[:, t : t + 1], past_key_values=cache, use_cache=True,
                    position_ids=torch.full((2, 1), t))
        cache = out.past_key_values
        steps.append(out.logits)
    torch.testing.assert_close(torch.cat(steps, 1), full, rtol=0, atol=1e-5)
    assert cache.get_seq_length() == 16


# ----------------------------------------------------------------------------------------------------------------
# the block_size bound of the learned tables, without a host synchronisation in training

@pytest.mark.parametrize("attention_type", ["causal", "synthesizer"])
def test_a_training_forward_reads_no_position_back(attention_type, refuse_host_reads):
    """On a GPU every value read on the host waits for the step: a training forward and backward, with default
    positions or with the positions of packed rows, reads none (the bound is decided from the shapes or checked on
    the device). The control: evaluation with given positions does read them back, and the patch catches it."""
    model = tiny_model("learned", attention_type).train()
    ids = torch.randint(2, 40, (2, 32))
    packed_positions = torch.cat([torch.arange(20), torch.arange(12)]).expand(2, 32)
    refuse_host_reads()
    model(ids, labels=ids).loss.backward()
    model(ids, position_ids=packed_positions, labels=ids).loss.backward()
    model.eval()
    with pytest.raises(AssertionError, match="read on the host"):
        model(ids, position_ids=packed_positions)


@pytest.mark.parametrize("attention_type", ["causal", "synthesizer"])
def test_a_position_beyond_block_size_is_refused(attention_type):
    """Where a position past the learned table can occur, the error names it: default positions longer than the
    context (decided from the shapes, in training too), given positions (read back in evaluation, asserted on the
    device in training), and default positions under a padding mask wider than the context."""
    model = tiny_model("learned", attention_type)
    too_long = torch.randint(2, 40, (1, 33))
    for mode in (model.train, model.eval):
        mode()
        with pytest.raises(ValueError, match="position 32 is beyond block_size=32"):
            model(too_long)
    ids = torch.randint(2, 40, (1, 8))
    beyond = torch.arange(30, 38)[None]
    with pytest.raises(ValueError, match="position 37 is beyond block_size=32"):
        model.eval()(ids, position_ids=beyond)
    with pytest.raises(RuntimeError, match="a position in position_ids is beyond block_size=32"):
        model.train()(ids, position_ids=beyond)
    model.eval()
    padded = torch.randint(2, 40, (2, 40))
    mask = torch.ones(2, 40, dtype=torch.long)
    mask[0, :8] = 0  # row 0 ends at position 31, row 1 at 39
    with pytest.raises(ValueError, match="position 39 is beyond block_size=32"):
        model(padded, attention_mask=mask)
    mask[1, :8] = 0
    assert model(padded, attention_mask=mask).logits.shape == (2, 40, 40)  # left padding keeps both in range


# ----------------------------------------------------------------------------------------------------------------
# the registry: a new position encoding is one class in positions.py, and one property says where a model stops


class ToyPositions(PositionEncoding):
    """A new encoding written only against positions.py: a learned scale on the sinusoidal table, rope at another
    base, and a learned slope on how far back a key lies, so all three hooks and parameters of its own are
    exercised."""

    def __init__(self, config):
        super().__init__(config)
        self.scale = torch.nn.Parameter(torch.tensor(0.5))
        self.slope = torch.nn.Parameter(torch.tensor(0.1))

    @classmethod
    def check_config(cls, config):
        if config.n_embd % 4:
            raise ValueError("position_embedding_type='toy' needs n_embd divisible by 4")

    def forward(self, x, position_ids, table):
        return x + self.scale * sinusoidal_positions(position_ids, self.config.n_embd)

    def rotation(self, position_ids):
        cos, sin = rope_cos_sin(position_ids, self.config.head_dim, 100.0)
        return lambda q, k: (apply_rope(q, cos, sin), apply_rope(k, cos, sin))

    def attention_bias(self, distance):
        return -self.slope * distance.clamp(min=0)


def test_a_new_position_encoding_needs_only_the_registry(monkeypatch, tmp_path):
    """Registered at run time (and removed after by monkeypatch), the toy validates, builds, trains its own parameter,
    runs past block_size, decodes with the KV cache as without it, and saves and loads under its name."""
    monkeypatch.setitem(POSITION_ENCODINGS, "toy", ToyPositions)
    with pytest.raises(ValueError, match="divisible by 4"):
        CharGPTConfig(position_embedding_type="toy", n_embd=6, n_head=3)
    model = tiny_model("toy")
    assert "transformer.positions.scale" in model.state_dict() and model.transformer.pos_emb is None
    assert not model.config.bounded_context
    ids = torch.randint(2, 40, (2, 20))
    model.train()(ids, labels=ids).loss.backward()
    own = model.transformer.positions
    assert all(p.grad is not None and p.grad != 0 for p in (own.scale, own.slope))  # each hook reaches the loss
    model.eval()
    cached = model.generate(ids[:, :5], max_new_tokens=40, do_sample=False)  # 45 > block_size 32 positions
    assert cached.shape == (2, 45)
    assert torch.equal(cached, model.generate(ids[:, :5], max_new_tokens=40, do_sample=False, use_cache=False))
    shifted = model(ids, position_ids=torch.arange(3, 23).expand(2, 20)).logits
    assert (shifted - model(ids).logits).abs().max() > 1e-3  # positions matter
    model.save_pretrained(tmp_path)
    loaded = CharGPTForCausalLM.from_pretrained(tmp_path).eval()
    assert loaded.config.position_embedding_type == "toy"
    torch.testing.assert_close(loaded(ids).logits, model(ids).logits, rtol=0, atol=0)


def test_bounded_context_is_what_the_length_errors_and_answering_read(monkeypatch):
    """`config.bounded_context` follows the registry (and synthesizer attention); the model's position check,
    generate's upfront check and answering.question_problem all read it: made True, a rope model refuses as a
    learned one does."""
    for name, encoding in POSITION_ENCODINGS.items():
        assert CharGPTConfig(position_embedding_type=name).bounded_context is encoding.bounded
        assert CharGPTConfig(position_embedding_type=name, attention_type="synthesizer").bounded_context
    tokenizer = CharTokenizer.from_corpus("Where was Ann born?")
    question = "Where was Ann born?"  # 19 characters + MASK + 20 new ones: 39 positions, past block_size 32
    model = tiny_model("rope")
    long_ids = torch.randint(2, 40, (1, 33))
    model(long_ids)
    assert question_problem(question, tokenizer, model.config, max_new_tokens=20) is None
    monkeypatch.setattr(CharGPTConfig, "bounded_context", property(lambda self: True))
    with pytest.raises(ValueError, match="position 32 is beyond block_size=32"):
        model(long_ids)
    with pytest.raises(ValueError, match="more than block_size=32"):
        model.generate(long_ids[:, :20], max_new_tokens=20, do_sample=False)
    assert "more than this model's block_size=32" in question_problem(question, tokenizer, model.config, 20)


def test_a_reciting_model_with_learned_positions_answers_in_what_its_recitation_leaves_of_the_block():
    """`--preset best` recites up to 144 characters of a 160 block: with learned positions, recitation + MASK + the
    evaluation's 32 characters do not fit, so answering generates only what the recitation leaves (`answer_budget`,
    the room its finetuning rows had) instead of refusing the questions; rope and the direct format keep 32."""
    from modeling_chargpt.answering import AnsweringSettings, answer_budget, answer_questions

    tokenizer = CharTokenizer.from_corpus("Where was Ann Lee born? Paris")
    model = tiny_model("learned", vocab_size=tokenizer.vocab_size, answer_format="recite", recitation_chars=24)
    assert answer_budget(model.config, 32, recites=True) == 32 - 24
    assert answer_budget(model.config, 32, recites=False) == 32
    assert answer_budget(tiny_model("rope", answer_format="recite", recitation_chars=24).config, 32, True) == 32
    question = "Where was Ann Lee born?"
    assert question_problem(question, tokenizer, model.config, max_new_tokens=32) is None
    answers = answer_questions(model, tokenizer, [question], AnsweringSettings(answer_format="recite"),
                               score=True, show_progress=False)
    # recitation + MASK + answer, its last character never fed back: the block, no position past it
    assert len(answers.contexts[0]) + len(answers.answers[0]) <= model.config.block_size
    assert "more than this model's block_size=32" in question_problem(question, tokenizer, model.config, 32,
                                                                      answer_format="direct")


def test_alibi_slopes_are_the_papers_and_fill_other_head_counts_from_the_next_power_of_two():
    assert alibi_slopes(8).tolist() == paper_alibi_slopes(8)  # 1/2, 1/4, ..., 1/256
    assert alibi_slopes(4).tolist() == paper_alibi_slopes(4)
    # 6 heads: the 4 of four heads, then every other of eight heads' (1/2, 1/8)
    assert alibi_slopes(6).tolist() == [*paper_alibi_slopes(4), 2.0 ** -1, 2.0 ** -3]


def test_alibi_packed_rows_and_shifted_positions_give_each_examples_own_logits():
    """Its bias depends on how far back a key lies, so a packed example sees what it sees alone, and shifting every
    position changes nothing (no position vector)."""
    from modeling_chargpt import packed_causal_mask

    model = tiny_model("alibi")
    a, b = torch.randint(2, 40, (1, 12)), torch.randint(2, 40, (1, 8))
    position_ids = torch.cat((torch.arange(12), torch.arange(8)))[None]
    packed = model(torch.cat((a, b), 1), attention_mask=packed_causal_mask(position_ids),
                   position_ids=position_ids).logits
    torch.testing.assert_close(packed[:, :12], model(a).logits, rtol=0, atol=1e-5)
    torch.testing.assert_close(packed[:, 12:], model(b).logits, rtol=0, atol=1e-5)
    shifted = model(a, position_ids=torch.arange(5, 17)[None]).logits
    torch.testing.assert_close(shifted, model(a).logits, rtol=0, atol=1e-5)
