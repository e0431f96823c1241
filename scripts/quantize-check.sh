#!/usr/bin/env bash
# The GPU quantizers against their CPU twins, bit for bit, on this
# machine's adapter: writes a safetensors file of awkward tensors (many
# binades, zero blocks, one outlier per block, all-equal, a 2-D weight,
# ±0/±Inf/NaN, f32 subnormals, a tensor below NVFP4's f32 scale range, an
# F16 tensor) and runs `BINARY quantize --check` on it in every format
# (nvfp4 and e4m3-blockwise also in 2-D blocks; stochastic rounding for
# e4m3-tensor, mxfp4 and nvfp4).
# One line per run; exit status 1 if any run differs or fails.
#
#   scripts/quantize-check.sh target/release/webtrain
#   WEBTRAIN_ADAPTER=NVIDIA scripts/quantize-check.sh .gpubin/webtrain-qcheck
#
# Needs only python3 (stdlib). A few seconds on a GPU.

set -u
BIN=${1:?usage: scripts/quantize-check.sh BINARY}
DIR=$(mktemp -d)
trap 'rm -rf "$DIR"' EXIT

source "$(dirname "$0")/nvidia-icd.sh"

python3 - "$DIR/x.safetensors" <<'PY' || exit 1
import json, random, struct, sys

rng = random.Random(20250101)
tensors = {}  # name -> (dtype, shape, bytes)

def f32(name, shape, values):
    """values: floats, or ints taken as f32 bit patterns."""
    out = bytearray()
    for v in values:
        out += struct.pack('<I', v) if isinstance(v, int) else struct.pack('<f', v)
    assert len(values) == shape[0] * shape[1], name
    tensors[name] = ('F32', shape, bytes(out))

def bits(x):
    return struct.unpack('<I', struct.pack('<f', x))[0]

NAN, NNAN, INF, NINF, NZERO = 0x7fc00000, 0xffc00000, 0x7f800000, 0xff800000, 0x80000000
MAXF = 0x7f7fffff

# random normals over 81 binades: x·2^k, k in -40..40
f32('binades', [64, 128], [rng.gauss(0, 1) * 2.0 ** rng.randint(-40, 40) for _ in range(64 * 128)])

# columns 0..31 all zero (±0): zero MX blocks, NVFP4 1×16 and 16×16 blocks
f32('zero_blocks', [16, 64], [(0.0 if rng.random() < 0.5 else NZERO) if c < 32 else rng.gauss(0, 1)
                              for r in range(16) for c in range(64)])

# one huge outlier per 32 values (so per MX block and per NVFP4 block pair), at varied places
vals = [rng.gauss(0, 1) * 1e-3 for _ in range(16 * 128)]
for b in range(len(vals) // 32):
    vals[b * 32 + rng.randrange(32)] = rng.choice([-1, 1]) * 3e4 * (1 + rng.random())
f32('outliers', [16, 128], vals)

f32('all_equal', [16, 64], [1.2345678] * (16 * 64))
f32('all_equal_neg_tie', [16, 32], [-2.5] * (16 * 32))

# a 2-D weight, 16×16-block friendly
f32('weight', [64, 128], [rng.gauss(0, 0.02) for _ in range(64 * 128)])

# ±0, ±Inf, NaN in some blocks; huge finite values, ties and max f32 in others
specials = []
for r in range(16):
    for c in range(64):
        if c < 16 and r < 4:
            specials.append(rng.choice([0.0, NZERO, INF, NINF, NAN, NNAN, 1.0, -3.0]))
        elif c < 32 and r < 8:
            specials.append(rng.choice([MAXF, MAXF | NZERO, 1e38, -6e4, 65520.0, 448.0, 464.0, 0.75, 0.0]))
        else:
            specials.append(rng.choice([1.0, 1.5, 2.5, 0.25, 3.0, 5.0, -7.0]) * 2.0 ** rng.randint(-10, 10))
f32('specials', [16, 64], specials)

# f32 subnormals, random signs; every other 32-block mixed with tiny normals
subs = []
for i in range(16 * 64):
    s = rng.choice([0, NZERO])
    if (i // 32) % 2 and rng.random() < 0.3:
        subs.append(s | (rng.randrange(1, 0x80) << 23 | rng.randrange(1 << 23)))
    else:
        subs.append(s | rng.randrange(1, 1 << 23))
f32('subnormals', [16, 64], subs)

# a tensor far below NVFP4's f32 tensor scale range (amax ~ 1e-36)
f32('tiny', [16, 32], [rng.gauss(0, 1) * 2.0 ** -120 for _ in range(16 * 32)])

# an F16 input
half = b''.join(struct.pack('<e', rng.gauss(0, 1) * 2.0 ** rng.randint(-14, 14)) for _ in range(16 * 32))
tensors['half'] = ('F16', [16, 32], half)

header, offset = {}, 0
for name, (dtype, shape, data) in tensors.items():
    header[name] = {'dtype': dtype, 'shape': shape, 'data_offsets': [offset, offset + len(data)]}
    offset += len(data)
h = json.dumps(header).encode()
h += b' ' * (-len(h) % 8)
with open(sys.argv[1], 'wb') as f:
    f.write(struct.pack('<Q', len(h)) + h + b''.join(d for _, _, d in tensors.values()))
PY

runs=(
    "bf16" "f16" "e4m3" "e5m2" "e4m3-tensor" "e5m2-tensor" "e4m3-tensor --stochastic 7"
    "mxfp8-e4m3" "mxfp8-e4m3-rceil" "mxfp8-e4m3-ceil" "mxfp8-e5m2" "mxfp6-e2m3" "mxfp6-e3m2" "mxfp4"
    "nvfp4" "nvfp4 --block 2d" "e4m3-blockwise" "e4m3-blockwise --block 2d"
    "nvfp4-4over6" "nvfp4-4over6 --block 2d" "nvfp4-4over6-mae" "nvfp4-4over6 --stochastic 7" "e4m3-row"
    "mxfp4 --stochastic 7" "nvfp4 --stochastic 7" "nvfp4 --block 2d --stochastic 7"
    "nvfp4-ms-eden" "nvfp4-ms-eden --stochastic 7" "mxfp4-quest" "mxfp4-tseng" "mxfp4-tseng --stochastic 7"
)
failed=0
start=$(date +%s.%N)
for r in "${runs[@]}"; do
    t0=$(date +%s.%N)
    # shellcheck disable=SC2086
    "$BIN" quantize --check --format $r --in "$DIR/x.safetensors" --out "$DIR/y.safetensors" \
        >"$DIR/out.jsonl" 2>"$DIR/err.txt"
    rc=$?
    t1=$(date +%s.%N)
    python3 - "$r" "$rc" "$t0" "$t1" "$DIR/out.jsonl" "$DIR/err.txt" <<'PY' || failed=1
import json, sys
run, rc, t0, t1, out, err = sys.argv[1], int(sys.argv[2]), float(sys.argv[3]), float(sys.argv[4]), sys.argv[5], sys.argv[6]
lines = [json.loads(l) for l in open(out) if l.strip()]
summary = next((l for l in lines if l.get('summary')), None)
check = (summary or {}).get('check') or {}
bad = [l for l in lines if not l.get('summary') and (l['check']['values_differing'] or not l['check']['counts_agree'])]
ok = rc == 0 and check.get('all_match') is True and not bad
if summary is None:
    status = 'no summary'
else:
    status = '%d tensors, %d values, %d differ, counters %s' % (
        summary['tensors'], summary['values'], check.get('values_differing', -1),
        'agree' if not any(not l['check']['counts_agree'] for l in lines if not l.get('summary')) else 'DIFFER')
print('%-4s %-32s %s  [%s]  %.2f s' % ('ok' if ok else 'FAIL', run, status, check.get('adapter', '?'), float(t1) - float(t0)))
if not ok:
    for l in bad:
        print('       %s %s: %s' % (l['name'], l['shape'], json.dumps(l['check'])))
    for l in open(err).read().strip().splitlines()[-5:]:
        print('       stderr: ' + l)
    sys.exit(1)
PY
done
python3 -c 'import sys; print("total %.1f s: %s" % (float(sys.argv[2]) - float(sys.argv[1]), sys.argv[3]))' \
    "$start" "$(date +%s.%N)" "$([ $failed = 0 ] && echo 'all runs bit-exact' || echo 'SOME RUNS FAILED')"
exit $failed
