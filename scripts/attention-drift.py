#!/usr/bin/env python3
"""Whose error is the attention drift with depth (issue 29, "Also found")?

Builds small random LlamaForCausalLM models (3-4 layers, d 128, MHA and GQA,
rope_theta 1e4 and 5e5, 300-512 tokens), saves each with save_pretrained,
runs webtrain's f32 forward through the CLI (`webtrain attention`,
`webtrain predict --top-k V`, `webtrain eval --logits`) on the same token
ids, and compares, per layer, the attention probabilities and the
next-token probabilities with transformers (eager attention) in float32
and with float64 references.

transformers' `model.double()` is not all float64: LlamaRMSNorm computes in
float32 (`hidden_states.to(torch.float32)`), LlamaRotaryEmbedding computes
the angles and cos/sin in float32, and eager_attention_forward's softmax
is `softmax(..., dtype=torch.float32)`. So the references are:

    hf64   transformers' model.double() as shipped (those float32 steps in it)
    f64    everything in float64: norms, softmax, RoPE (inv_freq theta^(-2j/D)
           and the angles pos*inv_freq in float64)
    f64a   float64 everywhere except the RoPE angle, which is transformers'
           float32 product f32(pos * inv_freq_hf), inv_freq_hf as transformers
           computes it in float32; cos/sin of that angle in float64. The exact
           value of the function transformers' f32 model means to compute.
    f64w   as f64a with webtrain's angle f32(pos * f32(theta^(-2j/D)))
           (ops::shapes::inv_freq: correctly rounded, which may differ from
           transformers' by an ulp); the exact value of webtrain's function.

Columns, per model and layer (max abs error of the [H, T, T] attention
probabilities; for the rows "probs" the max abs error over all T-1 x V
next-token probabilities, "target" the max relative error of the target
token's probability, "logits" the max abs logit error):

    wt-f64 wt-f64w wt-f64a wt-hf64  webtrain f32 against the references
    tf-f64 tf-f64a tf-hf64          transformers f32 against the references
    wt-tf                           webtrain against transformers, both f32
                                    (what the issue measured)
    conv                            f64a against f64w: the two libraries'
                                    exact functions apart (inv_freq ulps)
    local                           transformers' f32 attention of that layer
                                    alone, fed f64a's exact hidden state: the
                                    error one layer's f32 arithmetic makes by
                                    itself (the rest of tf-f64a is carried in)
    wt/tf                           wt-f64w / tf-f64a: > 1 means webtrain is
                                    further from its own exact function than
                                    transformers is from its
    early late                      wt-f64w over query rows < 64 and over the
                                    last 64 rows: RoPE's angle error grows
                                    with the position
    peak                            median over heads and rows >= 16 of the
                                    row's largest probability (f64): how sharp

Usage (torch, transformers, safetensors; no network):

    python3 scripts/attention-drift.py --webtrain target/release/webtrain --out OUT
        [--models mha-1e4,gqa-5e5] [--keep] [--device cpu|cuda]

writes OUT/drift.txt (the table, also printed) and OUT/drift.json. With
--keep the model folders and webtrain's outputs stay under OUT/work.
WEBTRAIN_ADAPTER picks the adapter as it does for any webtrain command.
"""

import argparse
import copy
import json
import os
import platform
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import torch
import transformers
from safetensors.torch import load_file
from transformers.models.llama import modeling_llama

# name: (layers, heads, kv heads, theta, tokens, weight std); d 128, ffn 256,
# vocab 256. Weights N(0, std) (std 0.1 as tests/parity/make_fixtures.py;
# larger: sharper attention), gains U(0.5, 1.5).
MODELS = {
    "mha-1e4": (4, 4, 4, 1e4, 300, 0.1),      # head_dim 32
    "gqa-1e4": (4, 8, 2, 1e4, 512, 0.1),      # head_dim 16, 4 query heads per kv head
    "mha-5e5": (4, 2, 2, 5e5, 300, 0.1),      # head_dim 64
    "gqa-5e5": (3, 4, 2, 5e5, 400, 0.1),      # head_dim 32
    "gqa-5e5-sharp": (4, 4, 2, 5e5, 300, 0.15),
}
D, FFN, VOCAB = 128, 256, 256


def build(name, seed):
    layers, heads, kv, theta, tokens, std = MODELS[name]
    config = transformers.LlamaConfig(
        vocab_size=VOCAB, hidden_size=D, intermediate_size=FFN, num_hidden_layers=layers,
        num_attention_heads=heads, num_key_value_heads=kv, max_position_embeddings=max(512, tokens),
        rope_theta=theta, rms_norm_eps=1e-5, tie_word_embeddings=False, hidden_act="silu",
        attention_bias=False, mlp_bias=False)
    assert config.rope_parameters["rope_theta"] == theta, config.rope_parameters
    torch.manual_seed(seed)
    model = transformers.LlamaForCausalLM(config).float()
    # as tests/parity/make_fixtures.py: weights far from the 0.02 init, gains around 1
    with torch.no_grad():
        for p in model.parameters():
            if p.dim() == 1:
                p.uniform_(0.5, 1.5)
            else:
                p.normal_(0.0, std)
    ids = torch.randint(0, VOCAB, (tokens,), generator=torch.Generator().manual_seed(1000 + seed))
    model.config._attn_implementation = "eager"
    return model.eval(), ids


# --- float64 references -------------------------------------------------------

class Rope64(torch.nn.Module):
    """cos/sin in float64 of angles pos * inv_freq: exact (inv_freq None) or
    of the float32 product pos * inv_freq (inv_freq a float32 tensor)."""

    def __init__(self, head_dim, theta, inv_freq32):
        super().__init__()
        self.head_dim, self.theta, self.inv_freq32 = head_dim, theta, inv_freq32
        self.calls = 0

    def forward(self, x, position_ids):
        self.calls += 1
        if self.inv_freq32 is None:
            j = torch.arange(0, self.head_dim, 2, dtype=torch.float64)
            inv = self.theta ** (-j / self.head_dim)
            freqs = position_ids[..., None].double() * inv.to(x.device)
        else:
            freqs = (position_ids[..., None].float() * self.inv_freq32.to(x.device)).double()
        emb = torch.cat((freqs, freqs), dim=-1)
        return emb.cos().to(x.dtype), emb.sin().to(x.dtype)


def norm64_forward(self, h):
    self.calls = getattr(self, "calls", 0) + 1
    variance = h.pow(2).mean(-1, keepdim=True)
    return self.weight * (h * torch.rsqrt(variance + self.variance_epsilon))


EAGER_CALLS = [0]


def eager64(module, query, key, value, attention_mask, scaling, dropout=0.0, **kwargs):
    """transformers' eager_attention_forward with the softmax in the inputs' dtype."""
    EAGER_CALLS[0] += 1
    k = modeling_llama.repeat_kv(key, module.num_key_value_groups)
    v = modeling_llama.repeat_kv(value, module.num_key_value_groups)
    w = torch.matmul(query, k.transpose(2, 3)) * scaling
    if attention_mask is not None:
        w = w + attention_mask
    w = torch.softmax(w, dim=-1)
    out = torch.matmul(w, v).transpose(1, 2).contiguous()
    return out, w


def webtrain_inv_freq(head_dim, theta):
    return torch.tensor([theta ** (-2.0 * j / head_dim) for j in range(head_dim // 2)],
                        dtype=torch.float64).float()


def run(model, ids, device):
    with torch.no_grad():
        out = model(input_ids=ids[None].to(device), output_attentions=True, output_hidden_states=True)
    return dict(attn=[a[0].double().cpu() for a in out.attentions],
                hidden=[h[0].double().cpu() for h in out.hidden_states],
                logits=out.logits[0].double().cpu())


def reference(model32, ids, angles, device):
    """float64 forward; angles: 'hf' (transformers' model.double() as is),
    'exact', or a float32 inv_freq tensor for f32(pos * inv_freq)."""
    model = copy.deepcopy(model32).double()
    if isinstance(angles, str) and angles == "hf":
        return run(model, ids, device)
    c = model.config
    head_dim = c.hidden_size // c.num_attention_heads
    rope = Rope64(head_dim, c.rope_parameters["rope_theta"], None if isinstance(angles, str) else angles)
    model.model.rotary_emb = rope
    norms = [m for m in model.modules() if isinstance(m, modeling_llama.LlamaRMSNorm)]
    for m in norms:
        m.forward = norm64_forward.__get__(m)
    saved, EAGER_CALLS[0] = modeling_llama.eager_attention_forward, 0
    modeling_llama.eager_attention_forward = eager64
    try:
        r = run(model.to(device), ids, device)
    finally:
        modeling_llama.eager_attention_forward = saved
    layers = c.num_hidden_layers
    got = (rope.calls, EAGER_CALLS[0], sum(getattr(m, "calls", 0) for m in norms))
    if got != (1, layers, 2 * layers + 1):
        sys.exit(f"the float64 patches were not all used (rope, attention, norms calls {got}): "
                 f"transformers {transformers.__version__} changed its Llama code")
    return r


def local_f32(model32, ref, ids, device):
    """Each layer's f32 attention probabilities from ref's float64 input to that layer."""
    T = len(ids)
    pos = torch.arange(T, device=device)[None]
    mask = torch.full((T, T), torch.finfo(torch.float32).min, device=device).triu(1)[None, None]
    maps = []
    with torch.no_grad():
        for layer, h in zip(model32.model.layers, ref["hidden"]):
            x = layer.input_layernorm(h.float().to(device)[None])
            cos_sin = model32.model.rotary_emb(x, pos)
            _, w = layer.self_attn(hidden_states=x, position_embeddings=cos_sin, attention_mask=mask)
            maps.append(w[0].double().cpu())
    return maps


# --- webtrain -------------------------------------------------------------------

def webtrain(binary, args, log):
    t = time.time()
    p = subprocess.run([binary, *args], capture_output=True, text=True)
    log.append(dict(args=args[0], seconds=round(time.time() - t, 2), rc=p.returncode))
    if p.returncode != 0:
        sys.exit(f"webtrain {' '.join(args)} failed ({p.returncode}):\n{p.stderr}{p.stdout}")
    return p.stdout


def run_webtrain(binary, folder, ids, log):
    tokens = folder / "tokens.txt"
    tokens.write_text(" ".join(str(int(i)) for i in ids) + "\n")
    hf = ["--hf", str(folder), "--tokens", str(tokens)]
    webtrain(binary, ["attention", *hf, "--out", str(folder / "wt-attention.safetensors")], log)
    maps = load_file(folder / "wt-attention.safetensors")
    attn = [maps[f"attention.{l}"].double() for l in range(len(maps))]
    T = len(ids)
    probs = torch.full((T - 1, VOCAB), float("nan"), dtype=torch.float64)
    for line in webtrain(binary, ["predict", *hf, "--top-k", str(VOCAB)], log).splitlines():
        p = json.loads(line)
        for tok, prob in p["top"]:
            probs[p["position"], tok] = prob
    assert not probs.isnan().any(), "predict left probabilities out"
    out = webtrain(binary, ["eval", *hf, "--logits", str(folder / "wt-logits.safetensors")], log)
    adapter = json.loads(out.strip().splitlines()[-1]).get("adapter")
    logits = load_file(folder / "wt-logits.safetensors")["logits"].double()
    return dict(attn=attn, probs=probs, logits=logits, adapter=adapter)


# --- comparison -----------------------------------------------------------------

def maxabs(a, b):
    return float((a - b).abs().max())


def probs_of(logits):
    return torch.softmax(logits[:-1].double(), dim=-1)  # positions 0..T-2, as predict


def compare(name, seed, binary, work, device):
    t0 = time.time()
    model32, ids = build(name, seed)
    folder = work / name
    folder.mkdir(parents=True, exist_ok=True)
    model32.save_pretrained(folder)
    T = len(ids)
    c = model32.config
    head_dim = c.hidden_size // c.num_attention_heads
    theta = c.rope_parameters["rope_theta"]
    inv_hf = model32.model.rotary_emb.inv_freq.detach().float().cpu().clone()
    inv_wt = webtrain_inv_freq(head_dim, theta)
    ulps = int((inv_hf.view(torch.int32) - inv_wt.view(torch.int32)).abs().gt(0).sum())
    model32 = model32.to(device)

    tf = run(model32, ids, device)
    refs = {"hf64": reference(model32, ids, "hf", device),
            "f64": reference(model32, ids, "exact", device),
            "f64a": reference(model32, ids, inv_hf, device)}
    refs["f64w"] = refs["f64a"] if ulps == 0 else reference(model32, ids, inv_wt, device)
    local = local_f32(model32, refs["f64a"], ids, device)
    t_torch = time.time() - t0

    log = []
    wt = run_webtrain(binary, folder, ids, log)
    t_wt = sum(e["seconds"] for e in log)

    rows = []
    e = min(64, T // 4)
    for l in range(c.num_hidden_layers):
        w, t = wt["attn"][l], tf["attn"][l]
        r = {k: v["attn"][l] for k, v in refs.items()}
        row = dict(layer=l, **{f"wt-{k}": maxabs(w, r[k]) for k in WT_REFS},
                   **{f"tf-{k}": maxabs(t, r[k]) for k in TF_REFS},
                   **{"wt-tf": maxabs(w, t), "conv": maxabs(r["f64a"], r["f64w"])},
                   local=maxabs(local[l], r["f64a"]),
                   early=maxabs(w[:, :e], r["f64w"][:, :e]), late=maxabs(w[:, -e:], r["f64w"][:, -e:]),
                   peak=float(r["f64"][:, 16:].amax(-1).median()))
        row["wt/tf"] = row["wt-f64w"] / max(row["tf-f64a"], 1e-30)
        rows.append(row)

    def head(kind, get, metric):
        wv, tv = get(wt, "wt"), get(tf, "tf")
        rv = {k: get(v, k) for k, v in refs.items()}
        row = dict(layer=kind, **{f"wt-{k}": metric(wv, rv[k]) for k in WT_REFS},
                   **{f"tf-{k}": metric(tv, rv[k]) for k in TF_REFS},
                   **{"wt-tf": metric(wv, tv), "conv": metric(rv["f64a"], rv["f64w"])})
        row["wt/tf"] = row["wt-f64w"] / max(row["tf-f64a"], 1e-30)
        return row

    def probs(x, who):
        return x["probs"] if who == "wt" else probs_of(x["logits"])

    targets = ids[1:].long()

    def target_rel(a, b):
        pa, pb = a.gather(1, targets[:, None]), b.gather(1, targets[:, None])
        return float(((pa - pb).abs() / pb).max())

    rows.append(head("probs", probs, maxabs))
    rows.append(head("target", probs, target_rel))
    rows.append(head("logits", lambda x, who: x["logits"][: T - 1], maxabs))
    # predict's probabilities against eval's logits: both webtrain, one forward
    self_check = maxabs(wt["probs"], probs_of(wt["logits"]))

    layers, heads, kv, _, _, std = MODELS[name]
    return dict(model=name, layers=layers, heads=heads, kv_heads=kv, head_dim=head_dim, theta=theta, std=std,
                tokens=T, inv_freq_ulp_differences=ulps, adapter=wt["adapter"], rows=rows,
                predict_vs_eval_probs=self_check,
                seconds=dict(torch=round(t_torch, 2), webtrain=round(t_wt, 2), calls=log))


WT_REFS, TF_REFS = ("f64", "f64w", "f64a", "hf64"), ("f64", "f64a", "hf64")
COLS = ["wt-f64", "wt-f64w", "wt-f64a", "wt-hf64", "tf-f64", "tf-f64a", "tf-hf64", "wt-tf", "conv", "local",
        "wt/tf", "early", "late", "peak"]


def table(results):
    lines = []
    for r in results:
        lines.append(f"\n{r['model']}: {r['layers']} layers, {r['heads']} heads / {r['kv_heads']} kv, "
                     f"head_dim {r['head_dim']}, theta {r['theta']:g}, {r['tokens']} tokens; "
                     f"inv_freq: {r['inv_freq_ulp_differences']} of {r['head_dim'] // 2} differ "
                     f"(transformers vs webtrain); adapter {r['adapter']}")
        lines.append(f"{'layer':>7}" + "".join(f"{c:>10}" for c in COLS))
        for row in r["rows"]:
            cells = []
            for c in COLS:
                v = row.get(c)
                cells.append(f"{'':>10}" if v is None else f"{v:>10.2f}" if c in ("wt/tf", "peak") else f"{v:>10.2e}")
            lines.append(f"{row['layer']:>7}" + "".join(cells))
        layers = [row for row in r["rows"] if isinstance(row["layer"], int)]
        w = max(layers, key=lambda row: row["wt/tf"])
        lines.append(f"  largest wt/tf {w['wt/tf']:.2f} at layer {w['layer']} (wt-f64w {w['wt-f64w']:.1e}, "
                     f"tf-f64a {w['tf-f64a']:.1e}); last layer: wt-tf {layers[-1]['wt-tf']:.1e} "
                     f"of which conv {layers[-1]['conv']:.1e}")
        lines.append(f"  predict's probs vs softmax(eval's logits): {r['predict_vs_eval_probs']:.1e}; "
                     f"seconds: torch {r['seconds']['torch']}, webtrain {r['seconds']['webtrain']}")
    return "\n".join(lines)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--webtrain", required=True, help="the webtrain binary")
    ap.add_argument("--out", required=True, type=Path, help="folder for drift.txt and drift.json")
    ap.add_argument("--models", default=",".join(MODELS), help=f"comma-separated, of {', '.join(MODELS)}")
    ap.add_argument("--device", default="cpu", help="torch's device (cpu: the default, deterministic)")
    ap.add_argument("--keep", action="store_true", help="keep the models and webtrain's outputs in OUT/work")
    a = ap.parse_args()
    started = time.time()
    transformers.utils.logging.disable_progress_bar()
    torch.set_grad_enabled(False)
    a.out.mkdir(parents=True, exist_ok=True)
    binary = str(Path(a.webtrain).resolve())
    work = a.out / "work" if a.keep else Path(tempfile.mkdtemp(prefix="attention-drift-"))
    names = [n for n in a.models.split(",") if n]
    for n in names:
        if n not in MODELS:
            sys.exit(f"unknown model {n}; known: {', '.join(MODELS)}")
    results = []
    try:
        for n in names:
            results.append(compare(n, list(MODELS).index(n), binary, work, a.device))
            print(table(results[-1:]), flush=True)
    finally:
        if not a.keep:
            shutil.rmtree(work, ignore_errors=True)
    meta = dict(torch=torch.__version__, transformers=transformers.__version__, python=platform.python_version(),
                device=a.device, machine=platform.machine(), webtrain=binary,
                webtrain_adapter_env=os.environ.get("WEBTRAIN_ADAPTER"), seconds=round(time.time() - started, 1),
                columns=__doc__[__doc__.index("Columns"):__doc__.index("Usage")].strip())
    text = (f"attention drift: webtrain f32 (wt) and transformers f32 (tf) against float64 references; "
            f"torch {meta['torch']}, transformers {meta['transformers']}, torch on {a.device}\n"
            + meta["columns"] + "\n" + table(results) + f"\n\ntotal {meta['seconds']} s\n")
    (a.out / "drift.txt").write_text(text)
    (a.out / "drift.json").write_text(json.dumps(dict(meta=meta, models=results), indent=1))
    print(f"\ntotal {meta['seconds']} s; wrote {a.out / 'drift.txt'} and {a.out / 'drift.json'}")


if __name__ == "__main__":
    main()
