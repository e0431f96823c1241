#!/usr/bin/env python3
"""What PyTorch says webtrain must compute: fixtures for the parity tests,
and the check that a model webtrain exported gives transformers' loss.

Run by hand (needs torch, transformers, safetensors); CI only reads the
committed fixtures:

    python3 tests/parity/make_fixtures.py fixtures
        builds small LlamaForCausalLM models with random weights and inputs
        and writes, per model, tests/parity/fixtures/<name>/{config.json,
        model.safetensors} (transformers' own save_pretrained) and
        expected.safetensors: input_ids [B, T+1], the logits of the first
        T positions, the loss with labels = input_ids, every parameter's
        gradient (grad.<name>) and every parameter and AdamW moment after
        one torch.optim.AdamW step with gradient clipping (after.<name>,
        m.<name>, v.<name>).

    python3 tests/parity/make_fixtures.py inspect
        for each fixture model, what `webtrain attention` and `webtrain
        predict` must print for the first row of its input_ids (all T+1
        tokens), into tests/parity/fixtures/<name>/inspect.safetensors:
        input_ids [T+1], attention.{layer} [H, T+1, T+1] (eager attention,
        output_attentions=True) and probs [T+1, V], the softmax of the
        logits. Read from the committed model.safetensors, so it does not
        depend on torch's random streams.

    python3 tests/parity/make_fixtures.py encode DIR TEXT N > TOKENS
        the first N token ids of the tail of TEXT (its last 4 KiB: held out
        of webtrain's training split), through DIR's tokenizer.json.

    python3 tests/parity/make_fixtures.py check-export DIR TOKENS WEBTRAIN_JSON
        loads the folder `webtrain export-hf` wrote, computes the loss on the
        token ids in TOKENS with labels = input_ids, and compares it with the
        JSON line `webtrain eval` printed for the same folder and tokens.

webtrain's batch is inputs ids[:, :T] with targets ids[:, 1:]; transformers
shifts labels = ids inside the model: the same T predictions per row, and
position T's logits (which webtrain does not compute) reach no loss.
"""

import json
import sys
from pathlib import Path

import torch
import transformers
from safetensors.torch import load_file, save_file

HERE = Path(__file__).resolve().parent

# Optimizer of the step: a clip that binds, webtrain's decay rule (2-D
# weights decay, norm gains do not), bias corrections from step 1.
STEP = dict(lr=1e-2, beta1=0.9, beta2=0.95, eps=1e-8, weight_decay=0.1, max_norm=0.5)

MODELS = {
    # GQA (4 query heads share 2 key/value heads), untied lm_head.
    "gqa": dict(vocab_size=40, hidden_size=64, intermediate_size=48, num_hidden_layers=2, num_attention_heads=4,
                num_key_value_heads=2, max_position_embeddings=64, rope_theta=10000.0, rms_norm_eps=1e-5,
                tie_word_embeddings=False, batch=2, seq=16),
    # Tied embeddings, multi-head attention, Llama 3's rope_theta.
    "tied": dict(vocab_size=56, hidden_size=32, intermediate_size=48, num_hidden_layers=2, num_attention_heads=2,
                 num_key_value_heads=2, max_position_embeddings=32, rope_theta=500000.0, rms_norm_eps=1e-6,
                 tie_word_embeddings=True, batch=3, seq=11),
}


def build(name, spec, seed):
    spec = dict(spec)
    batch, seq = spec.pop("batch"), spec.pop("seq")
    config = transformers.LlamaConfig(hidden_act="silu", attention_bias=False, mlp_bias=False, **spec)
    torch.manual_seed(seed)
    model = transformers.LlamaForCausalLM(config).float()
    # Weights far from the 0.02 init, so logits and attention are not flat;
    # gains spread around 1.
    with torch.no_grad():
        for pname, p in model.named_parameters():
            if p.dim() == 1:
                p.uniform_(0.5, 1.5)
            else:
                p.normal_(0.0, 0.1)
    ids = torch.randint(0, config.vocab_size, (batch, seq + 1))
    return model, ids


def step(model, ids):
    """Forward, backward and one clipped AdamW step; the expected tensors."""
    model.train()  # dropout is 0 in Llama: train and eval compute the same
    out = model(input_ids=ids, labels=ids)
    out.loss.backward()
    params = dict(model.named_parameters())  # a tied lm_head is embed_tokens: listed once
    expected = {
        "input_ids": ids.to(torch.int64).contiguous(),
        "logits": out.logits[:, :-1].detach().contiguous(),
        "loss": out.loss.detach().reshape(1),
    }
    for n, p in params.items():
        expected[f"grad.{n}"] = p.grad.detach().clone().contiguous()
    norm = torch.nn.utils.clip_grad_norm_(model.parameters(), STEP["max_norm"])
    assert norm > STEP["max_norm"], f"the clip must bind: grad norm {norm}"
    decay = [p for p in params.values() if p.dim() >= 2]
    gains = [p for p in params.values() if p.dim() < 2]
    opt = torch.optim.AdamW(
        [dict(params=decay, weight_decay=STEP["weight_decay"]), dict(params=gains, weight_decay=0.0)],
        lr=STEP["lr"], betas=(STEP["beta1"], STEP["beta2"]), eps=STEP["eps"],
    )
    opt.step()
    for n, p in params.items():
        expected[f"after.{n}"] = p.detach().clone().contiguous()
        expected[f"m.{n}"] = opt.state[p]["exp_avg"].clone().contiguous()
        expected[f"v.{n}"] = opt.state[p]["exp_avg_sq"].clone().contiguous()
    return expected, float(norm)


def fixtures():
    for seed, (name, spec) in enumerate(MODELS.items()):
        model, ids = build(name, spec, seed)
        out = HERE / "fixtures" / name
        out.mkdir(parents=True, exist_ok=True)
        model.save_pretrained(out, safe_serialization=True)
        (out / "generation_config.json").unlink(missing_ok=True)
        expected, norm = step(model, ids)
        meta = {k: repr(v) for k, v in STEP.items()}
        meta.update(torch=torch.__version__, transformers=transformers.__version__, grad_norm=repr(norm))
        save_file(expected, out / "expected.safetensors", metadata=meta)
        print(f"{name}: loss {expected['loss'].item():.6f}, grad norm {norm:.4f}, "
              f"{sum(p.numel() for p in model.parameters())} parameters -> {out}")


def inspect():
    for name in MODELS:
        folder = HERE / "fixtures" / name
        model = transformers.LlamaForCausalLM.from_pretrained(folder, dtype=torch.float32,
                                                              attn_implementation="eager")
        ids = load_file(folder / "expected.safetensors")["input_ids"][:1]
        with torch.no_grad():
            out = model(input_ids=ids, output_attentions=True)
        expected = {"input_ids": ids[0].contiguous(),
                    "probs": torch.softmax(out.logits[0].double(), dim=-1).float().contiguous()}
        for layer, attention in enumerate(out.attentions):
            expected[f"attention.{layer}"] = attention[0].contiguous()
        meta = dict(torch=torch.__version__, transformers=transformers.__version__)
        save_file(expected, folder / "inspect.safetensors", metadata=meta)
        print(f"{name}: {ids.shape[1]} tokens, {len(out.attentions)} attention maps -> {folder}")


def encode(folder, text, n):
    tokenizer = transformers.PreTrainedTokenizerFast(tokenizer_file=str(Path(folder) / "tokenizer.json"))
    tail = Path(text).read_bytes()[-4096:].decode("utf-8", errors="ignore")
    ids = tokenizer(tail)["input_ids"][: int(n)]
    print(" ".join(map(str, ids)))


def check_export(folder, tokens, webtrain_json):
    model = transformers.LlamaForCausalLM.from_pretrained(folder, dtype=torch.float32)
    ids = torch.tensor([[int(t) for t in Path(tokens).read_text().split()]])
    with torch.no_grad():
        loss = model(input_ids=ids, labels=ids).loss.item()
    theirs = json.loads(Path(webtrain_json).read_text().strip().splitlines()[-1])["loss"]
    tokenizer = transformers.PreTrainedTokenizerFast(tokenizer_file=str(Path(folder) / "tokenizer.json"))
    print(json.dumps({"tokens": ids.shape[1], "transformers_loss": loss, "webtrain_loss": theirs,
                      "relative_difference": abs(theirs - loss) / loss, "tokenizer_vocab": len(tokenizer),
                      "torch": torch.__version__, "transformers": transformers.__version__}))


if __name__ == "__main__":
    if sys.argv[1:2] == ["fixtures"]:
        fixtures()
    elif sys.argv[1:2] == ["inspect"]:
        inspect()
    elif sys.argv[1:2] == ["encode"] and len(sys.argv) == 5:
        encode(*sys.argv[2:])
    elif sys.argv[1:2] == ["check-export"] and len(sys.argv) == 5:
        check_export(*sys.argv[2:])
    else:
        sys.exit(__doc__)
