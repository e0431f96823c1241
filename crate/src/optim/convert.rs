//! AdamW state from one kind to the other, on the host: what switching the
//! optimizer state at a pause does. int8 → f32 is exact (each code's value
//! times its block's scale); f32 → int8 rounds each 256-value block against
//! its absmax stochastically, as the update kernel does after a step (the
//! code tables and decisions of `reference::optimizer`, which the kernel
//! tests hold bit-identical to the GPU's), with the dither of step 0.

use super::{HostState, OptimState};
use crate::ops::adam::{Int8Map, Int8Maps, QBLOCK, dither};

impl HostState {
    pub fn kind(&self) -> OptimState {
        match self {
            HostState::Fp32 { .. } => OptimState::Fp32,
            HostState::Int8 { .. } => OptimState::Int8,
        }
    }

    /// This state as `kind` (itself when it already is).
    pub fn convert(self, kind: OptimState) -> HostState {
        let maps = Int8Maps::dynamic();
        match (self, kind) {
            (s @ HostState::Fp32 { .. }, OptimState::Fp32)
            | (s @ HostState::Int8 { .. }, OptimState::Int8) => s,
            (
                HostState::Int8 {
                    m_codes,
                    v_codes,
                    m_scales,
                    v_scales,
                },
                OptimState::Fp32,
            ) => {
                let values = |codes: &[u8], scales: &[f32], map: &Int8Map| -> Vec<f32> {
                    codes
                        .iter()
                        .enumerate()
                        .map(|(i, &c)| map.dequantize(c, scales[i / QBLOCK]))
                        .collect()
                };
                HostState::Fp32 {
                    m: values(&m_codes, &m_scales, &maps.m),
                    v: values(&v_codes, &v_scales, &maps.v),
                }
            }
            (HostState::Fp32 { m, v }, OptimState::Int8) => {
                let mut out = HostState::Int8 {
                    m_codes: vec![0; m.len()],
                    v_codes: vec![0; v.len()],
                    m_scales: vec![],
                    v_scales: vec![],
                };
                let HostState::Int8 {
                    m_codes,
                    v_codes,
                    m_scales,
                    v_scales,
                } = &mut out
                else {
                    unreachable!()
                };
                for (b, (mb, vb)) in m.chunks(QBLOCK).zip(v.chunks(QBLOCK)).enumerate() {
                    let m_max = mb.iter().fold(0f32, |a, x| a.max(x.abs()));
                    let v_max = vb.iter().fold(0f32, |a, &x| a.max(x));
                    m_scales.push(m_max);
                    v_scales.push(v_max);
                    for (j, (&x, &y)) in mb.iter().zip(vb).enumerate() {
                        let i = b * QBLOCK + j;
                        m_codes[i] = maps.m.quantize(x, m_max, dither(i as u32, 0, 0));
                        v_codes[i] = maps.v.quantize(y, v_max, dither(i as u32, 0, 1));
                    }
                }
                out
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
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
}
