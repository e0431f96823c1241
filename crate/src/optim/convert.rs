//! AdamW state from one kind to the other, on the host: what switching the
//! optimizer state at a pause does. int8 → f32 is exact (each code's value
//! times its block's scale); f32 → int8 quantizes each 256-value block
//! against its absmax exactly as the update kernel does after a step (the
//! code tables and decisions of `reference::optimizer`, which the kernel
//! tests hold bit-identical to the GPU's).

use super::{HostState, OptimState};
use crate::reference::optimizer::{Int8Maps, QBLOCK};

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
            (s @ HostState::Fp32 { .. }, OptimState::Fp32) | (s @ HostState::Int8 { .. }, OptimState::Int8) => s,
            (HostState::Int8 { m_codes, v_codes, m_scales, v_scales }, OptimState::Fp32) => {
                let values = |codes: &[u8], scales: &[f32], map: &crate::reference::optimizer::Int8Map| -> Vec<f32> {
                    codes.iter().enumerate().map(|(i, &c)| map.dequantize(c, scales[i / QBLOCK])).collect()
                };
                HostState::Fp32 { m: values(&m_codes, &m_scales, &maps.m), v: values(&v_codes, &v_scales, &maps.v) }
            }
            (HostState::Fp32 { m, v }, OptimState::Int8) => {
                let mut out = HostState::Int8 { m_codes: vec![0; m.len()], v_codes: vec![0; v.len()], m_scales: vec![], v_scales: vec![] };
                let HostState::Int8 { m_codes, v_codes, m_scales, v_scales } = &mut out else { unreachable!() };
                for (b, (mb, vb)) in m.chunks(QBLOCK).zip(v.chunks(QBLOCK)).enumerate() {
                    let m_max = mb.iter().fold(0f32, |a, x| a.max(x.abs()));
                    let v_max = vb.iter().fold(0f32, |a, &x| a.max(x));
                    m_scales.push(m_max);
                    v_scales.push(v_max);
                    for (j, (&x, &y)) in mb.iter().zip(vb).enumerate() {
                        m_codes[b * QBLOCK + j] = maps.m.quantize(x, m_max);
                        v_codes[b * QBLOCK + j] = maps.v.quantize(y, v_max);
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
    use crate::data::SplitMix64;

    fn state(n: usize, seed: u64) -> HostState {
        let mut r = SplitMix64(seed);
        let mut u = || (r.next_u64() >> 40) as f32 / (1u64 << 24) as f32;
        let m = (0..n).map(|i| (u() - 0.5) * 10f32.powi(-((i % 5) as i32))).collect();
        let v = (0..n).map(|i| u() * u() * 10f32.powi(-2 * ((i % 5) as i32))).collect();
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
        let (HostState::Fp32 { m, v }, HostState::Fp32 { m: m2, v: v2 }) = (&fp32, &back) else { unreachable!() };
        for b in 0..n / QBLOCK {
            let r = b * QBLOCK..(b + 1) * QBLOCK;
            let m_max = m[r.clone()].iter().fold(0f32, |a, x| a.max(x.abs()));
            // m's coarsest step is 1/64 of a decade's top: within 1% of its block's absmax
            assert!(m[r.clone()].iter().zip(&m2[r.clone()]).all(|(a, b)| (a - b).abs() <= 0.01 * m_max));
            // v is coded on its root by a tree that is coarse far below the
            // block's max (up to ~37% of √v four decades down): check the
            // choice instead — each √v lands on its nearest code point
            let v_max = v[r.clone()].iter().fold(0f32, |a, &x| a.max(x));
            let points: Vec<f64> = Int8Maps::dynamic().v.values.iter().map(|&p| ((p * v_max) as f64).sqrt()).collect();
            for (a, b) in v[r.clone()].iter().zip(&v2[r]) {
                let (x, got) = ((*a as f64).sqrt(), (*b as f64).sqrt());
                let nearest = points.iter().map(|p| (x - p).abs()).fold(f64::INFINITY, f64::min);
                assert!((x - got).abs() <= nearest * (1.0 + 1e-5) + 1e-12, "block {b}: √v {x} coded as {got}, nearest point {nearest} away");
            }
        }
        assert_eq!(fp32.clone().convert(OptimState::Fp32), fp32);
    }
}
