"""TorchAO's 4-bit state maps, built with torch as TorchAO builds them
(bitsandbytes' create_dynamic_map(signed=True, max_exponent_bits=3,
total_bits=4): per decade i, the midpoints of torch.linspace(0.1, 1,
2^i + 1) times 10^(i-2), both signs, then 0 and 1, sorted; v's
linspace(0, 1, 17)[1:]), printed as f32 bits and compared with
webtrain's twin (ops::adam::Int4Code::maps, its test prints the same).
Needs only torch: run on the GPU machine by gpu-part7-states.sh."""
import struct
import sys

import torch

TWIN_M = [0xBF633333, 0xBF29999A, 0xBEE00000, 0xBE599999, 0xBD9EB852, 0xBD051EB9, 0xBBB43958,
          0x00000000, 0x3BB43958, 0x3D051EB9, 0x3D9EB852, 0x3E599999, 0x3EE00000, 0x3F29999A,
          0x3F633333, 0x3F800000]
TWIN_V = [struct.unpack("<I", struct.pack("<f", (k + 1) / 16))[0] for k in range(16)]


def signed_dynamic_map():
    data = []
    for i in range(3):
        bounds = torch.linspace(0.1, 1, 2**i + 1)
        means = (bounds[:-1] + bounds[1:]) / 2.0
        data += (10 ** (i - 2) * means).tolist()
        data += (-(10 ** (i - 2)) * means).tolist()
    data += [0, 1.0]
    return sorted(data)


def bits(values):
    t = torch.tensor(values, dtype=torch.float32)
    return [int(b) & 0xFFFFFFFF for b in t.view(torch.int32).tolist()]


ok = True
for name, got, twin in [("m", bits(signed_dynamic_map()), TWIN_M),
                        ("v", bits(torch.linspace(0, 1, 17)[1:].tolist()), TWIN_V)]:
    same = got == twin
    ok &= same
    print(f"int4 {name} map: torch {' '.join(f'{b:08x}' for b in got)}: "
          f"{'equal to the twin' if same else 'DIFFERS from the twin ' + ' '.join(f'{b:08x}' for b in twin)}")
sys.exit(0 if ok else 1)
