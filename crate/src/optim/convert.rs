//! AdamW state from one kind to another, on the host: what switching the
//! optimizer state at a pause does. Every kind goes through f32: to f32 is
//! exact (bf16's values; each code's value times its block's scale); from
//! f32, bf16 rounds to nearest even, fp8 and int4 code each block as the
//! update kernel does (TorchAO's scales, to nearest), int8-linear's m to
//! nearest against its block's absmax, and int8 (and int8-linear's v)
//! rounds each block against its absmax stochastically, as the update
//! kernel does after a step (the code tables and decisions of
//! `reference::optimizer`, which the kernel tests hold bit-identical to
//! the GPU's), with the dither of step 0.

use super::{ByteCode, HostState, OptimState};
use crate::ops::adam::{Fp8Code, Int4Code, Int8Maps, LinearCode, bf16_bits, bf16_value, dither};

impl HostState {
    pub fn kind(&self) -> OptimState {
        match self {
            HostState::Fp32 { .. } => OptimState::Fp32,
            HostState::Bf16 { .. } => OptimState::Bf16,
            HostState::Bytes {
                code: ByteCode::E4m3,
                ..
            } => OptimState::Fp8,
            HostState::Bytes {
                code: ByteCode::Dynamic,
                ..
            } => OptimState::Int8,
            HostState::Bytes {
                code: ByteCode::Int4,
                ..
            } => OptimState::Int4,
            HostState::Bytes {
                code: ByteCode::Linear,
                ..
            } => OptimState::Int8Linear,
        }
    }

    /// This state as `kind` (itself when it already is).
    pub fn convert(self, kind: OptimState) -> HostState {
        if self.kind() == kind {
            return self;
        }
        let (m, v) = self.into_f32();
        match kind.byte_code() {
            None if kind == OptimState::Bf16 => HostState::Bf16 {
                m: m.iter().map(|&x| bf16_bits(x)).collect(),
                v: v.iter().map(|&x| bf16_bits(x)).collect(),
            },
            None => HostState::Fp32 { m, v },
            Some(code) => bytes_of(code, &m, &v),
        }
    }

    /// The moments' values, exactly.
    fn into_f32(self) -> (Vec<f32>, Vec<f32>) {
        let (maps, int4) = (Int8Maps::dynamic(), *Int4Code::maps());
        match self {
            HostState::Fp32 { m, v } => (m, v),
            HostState::Bf16 { m, v } => (
                m.into_iter().map(bf16_value).collect(),
                v.into_iter().map(bf16_value).collect(),
            ),
            HostState::Bytes {
                code,
                m_codes,
                v_codes,
                m_scales,
                v_scales,
            } => {
                let n = m_codes.len() * code.per_word() as usize / 4;
                let values = |codes: &[u8], scales: &[f32], moment: usize| -> Vec<f32> {
                    (0..n)
                        .map(|i| {
                            let (c, s) = (code.code_at(codes, i), scales[i / code.block()]);
                            match code {
                                ByteCode::Dynamic => [&maps.m, &maps.v][moment].dequantize(c, s),
                                ByteCode::E4m3 => Fp8Code::value(c, s),
                                ByteCode::Int4 => Int4Code::value(c, s, &int4[moment]),
                                ByteCode::Linear if moment == 0 => LinearCode::value(c, s),
                                ByteCode::Linear => maps.v.dequantize(c, s),
                            }
                        })
                        .collect()
                };
                (
                    values(&m_codes, &m_scales, 0),
                    values(&v_codes, &v_scales, 1),
                )
            }
        }
    }
}

/// f32 moments as block-wise state of `code`, block by block.
fn bytes_of(code: ByteCode, m: &[f32], v: &[f32]) -> HostState {
    let (maps, [m4, v4]) = (Int8Maps::dynamic(), *Int4Code::maps());
    let bytes = code.code_bytes(m.len() as u64) as usize;
    let (mut m_codes, mut v_codes) = (vec![0; bytes], vec![0; bytes]);
    let (mut m_scales, mut v_scales) = (vec![], vec![]);
    let block = code.block();
    for (b, (mb, vb)) in m.chunks(block).zip(v.chunks(block)).enumerate() {
        let m_max = mb.iter().fold(0f32, |a, x| a.max(x.abs()));
        let v_max = vb.iter().fold(0f32, |a, &x| a.max(x));
        let (sm, sv) = match code {
            ByteCode::Dynamic | ByteCode::Linear => (m_max, v_max),
            ByteCode::E4m3 => (Fp8Code::scale(m_max), Fp8Code::scale(v_max)),
            ByteCode::Int4 => (Int4Code::scale(m_max), Int4Code::scale(v_max)),
        };
        m_scales.push(sm);
        v_scales.push(sv);
        for (j, (&x, &y)) in mb.iter().zip(vb).enumerate() {
            let i = b * block + j;
            let (cm, cv) = match code {
                ByteCode::Dynamic => (
                    maps.m.quantize(x, sm, dither(i as u32, 0, 0)),
                    maps.v.quantize(y, sv, dither(i as u32, 0, 1)),
                ),
                ByteCode::E4m3 => (Fp8Code::code(x, sm), Fp8Code::code(y, sv)),
                ByteCode::Int4 => (Int4Code::code(x, sm, &m4), Int4Code::code(y, sv, &v4)),
                ByteCode::Linear => (
                    LinearCode::code(x, sm),
                    maps.v.quantize(y, sv, dither(i as u32, 0, 1)),
                ),
            };
            code.set_code(&mut m_codes, i, cm);
            code.set_code(&mut v_codes, i, cv);
        }
    }
    HostState::Bytes {
        code,
        m_codes,
        v_codes,
        m_scales,
        v_scales,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ops::adam::QBLOCK;
    use crate::rng::SplitMix64;

    fn state(n: usize, seed: u64) -> HostState {
        let mut r = SplitMix64(seed);
        let mut u = || (r.next_u64() >> 40) as f32 / (1u64 << 24) as f32;
        let m = (0..n)
            .map(|i| (u() - 0.5) * 10f32.powi(-((i % 5) as i32)))
            .collect();
        let v = (0..n)
            .map(|i| u() * u() * 10f32.powi(-2 * ((i % 5) as i32)))
            .collect();
        HostState::Fp32 { m, v }
    }

    #[test]
    fn int8_round_trips_through_f32_exactly_and_f32_through_int8_closely() {
        let n = 4 * QBLOCK;
        let fp32 = state(n, 3);
        let int8 = fp32.clone().convert(OptimState::Int8);
        assert_eq!(int8.kind(), OptimState::Int8);
        let back = int8.clone().convert(OptimState::Fp32);
        // codes → values → codes is the identity (every value is a code point)
        assert_eq!(back.clone().convert(OptimState::Int8), int8);
        let (HostState::Fp32 { m, v }, HostState::Fp32 { m: m2, v: v2 }) = (&fp32, &back) else {
            unreachable!()
        };
        let maps = Int8Maps::dynamic();
        for b in 0..n / QBLOCK {
            let r = b * QBLOCK..(b + 1) * QBLOCK;
            // each value lands on one of the two code points around it
            for (x, got, map) in [(m, m2, &maps.m), (v, v2, &maps.v)] {
                let s = x[r.clone()].iter().fold(0f32, |a, x| a.max(x.abs())); // v ≥ 0
                for (&a, &q) in x[r.clone()].iter().zip(&got[r.clone()]) {
                    let k = map.values.iter().rposition(|&p| p * s <= a).unwrap();
                    let around = [
                        map.dequantize(k as u8, s),
                        map.dequantize((k + 1).min(255) as u8, s),
                    ];
                    assert!(
                        around.contains(&q),
                        "block {b}: {a} coded as {q}, not one of {around:?}"
                    );
                }
            }
        }
        assert_eq!(fp32.clone().convert(OptimState::Fp32), fp32);
    }

    /// bf16 and fp8 state: to f32 and back is the identity (every value is
    /// one of the codes' and, for fp8, the block's scale comes back: its
    /// absmax is 448·s); f32 through either lands within its rounding.
    #[test]
    fn bf16_and_fp8_round_trip_through_f32() {
        let n = 4 * QBLOCK;
        let fp32 = state(n, 5);
        let (HostState::Fp32 { m, v },) = (&fp32,) else {
            unreachable!()
        };
        for kind in [OptimState::Bf16, OptimState::Fp8] {
            let low = fp32.clone().convert(kind);
            assert_eq!(low.kind(), kind);
            let back = low.clone().convert(OptimState::Fp32);
            assert_eq!(back.clone().convert(kind), low, "{kind:?} → f32 → {kind:?}");
            let HostState::Fp32 { m: m2, v: v2 } = &back else {
                unreachable!()
            };
            for (x, y, moment) in [(m, m2, "m"), (v, v2, "v")] {
                for b in 0..n / QBLOCK {
                    let r = b * QBLOCK..(b + 1) * QBLOCK;
                    let absmax = x[r.clone()].iter().fold(0f32, |a, x| a.max(x.abs()));
                    for (&a, &q) in x[r.clone()].iter().zip(&y[r]) {
                        // bf16: half an ulp (2^-9 relative); E4M3: half of
                        // its step (2^-4 relative), or of its subnormal step
                        // 2^-9 of the scale absmax/448
                        let bound = match kind {
                            OptimState::Bf16 => a.abs() / 256.0,
                            _ => (a.abs() / 16.0).max(absmax / 448.0 / 1024.0),
                        };
                        assert!((a - q).abs() <= bound, "{kind:?} {moment}: {a} as {q}");
                    }
                }
            }
        }
    }

    /// int8-linear: m comes back within half a level (absmax/254) of its
    /// value, v as int8's (the same tables and dither).
    #[test]
    fn int8_linear_codes_m_to_the_nearest_level() {
        let n = 3 * QBLOCK + 17;
        let fp32 = state(n, 11);
        let linear = fp32.clone().convert(OptimState::Int8Linear);
        assert_eq!(linear.kind(), OptimState::Int8Linear);
        let (
            HostState::Bytes { v_codes, .. },
            HostState::Bytes {
                v_codes: int8_v, ..
            },
        ) = (&linear, &fp32.clone().convert(OptimState::Int8))
        else {
            unreachable!()
        };
        assert_eq!(v_codes, int8_v);
        let (HostState::Fp32 { m, .. }, HostState::Fp32 { m: m2, .. }) =
            (&fp32, &linear.convert(OptimState::Fp32))
        else {
            unreachable!()
        };
        for (x, y) in m.chunks(QBLOCK).zip(m2.chunks(QBLOCK)) {
            let absmax = x.iter().fold(0f32, |a, x| a.max(x.abs()));
            for (&a, &q) in x.iter().zip(y) {
                // half a level, and the rounding of the quotient and product
                assert!((a - q).abs() <= absmax / 254.0 * 1.0001, "{a} as {q}");
            }
        }
    }

    /// int4 state (TorchAO's): every value comes back as its block's map
    /// point nearest to x/scale (a tie either way), and as int4 again
    /// unchanged where the block's top value is a map point (v's 1.0; m's
    /// when its largest magnitude is positive: −1 codes as −0.8875).
    #[test]
    fn int4_codes_each_value_to_its_nearest_map_point() {
        let n = 4 * Int4Code::BLOCK + 40; // a short last block
        let fp32 = state(n, 7);
        let int4 = fp32.clone().convert(OptimState::Int4);
        assert_eq!(int4.kind(), OptimState::Int4);
        let HostState::Bytes { m_codes, .. } = &int4 else {
            unreachable!()
        };
        assert_eq!(m_codes.len(), ByteCode::Int4.code_bytes(n as u64) as usize);
        let (HostState::Fp32 { m, v }, HostState::Fp32 { m: m2, v: v2 }) =
            (&fp32, &int4.clone().convert(OptimState::Fp32))
        else {
            unreachable!()
        };
        for (x, got, map) in [(m, m2, Int4Code::maps()[0]), (v, v2, Int4Code::maps()[1])] {
            for (b, block) in x.chunks(Int4Code::BLOCK).enumerate() {
                let s = block.iter().fold(0f32, |a, x| a.max(x.abs()));
                for (j, &a) in block.iter().enumerate() {
                    let y = a / s;
                    let best = map
                        .iter()
                        .map(|p| (p - y).abs())
                        .fold(f32::INFINITY, f32::min);
                    let q = got[b * Int4Code::BLOCK + j];
                    assert!(
                        map.iter().any(|p| (p - y).abs() == best && p * s == q),
                        "block {b}: {a} (y = {y}) read back as {q}"
                    );
                }
            }
        }
        let back = int4
            .clone()
            .convert(OptimState::Fp32)
            .convert(OptimState::Int4);
        let (
            HostState::Bytes { v_codes, .. },
            HostState::Bytes {
                v_codes: v_back, ..
            },
        ) = (&int4, &back)
        else {
            unreachable!()
        };
        assert_eq!(v_codes, v_back, "v: int4 → f32 → int4");
    }
}
