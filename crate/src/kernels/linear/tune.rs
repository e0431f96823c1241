//! Which GEMM variant serves which shape on this adapter.

use std::collections::HashMap;

use half::f16;

use super::Output;
use super::gemm::{BStorage, Epilogue, GemmKey, GemmModule, Layout, Params, TileVariant};
use super::units::{self, Units};
use crate::error::Result;
use crate::gpu::coop::MatrixUnits;
use crate::gpu::{Dispatch, GemmPick, Gpu, KernelConfig};
use crate::kernels::boundary::SITE_NONE;
use crate::kernels::units::{GemmLayout, GemmVariant};
use crate::rng::{SplitMix64, uniform};
use crate::shaders::{COMMON, LINEAR, LINEAR_B16, LINEAR_B32, UNITS_OPERANDS};

/// SwiftShader's variant: it JIT-compiles every pipeline module for
/// seconds, and 8×8 micro-tiles' unrolled code made a mode's kernels take
/// 25.7 s to build against 15.8 s with these 4×4 ones, whose steps run as
/// fast (Chrome, 2 cores, 2026-11-25; docs/ARCHITECTURE.md).
const SWIFTSHADER_VARIANT: TileVariant = TileVariant::ALL[4];

/// The variant for shapes nobody timed: the first of `TileVariant::ALL`
/// that fits the adapter in every layout (on SwiftShader, its own first).
pub fn rule(gpu: &Gpu) -> TileVariant {
    let swiftshader = gpu.info.name.to_lowercase().contains("swiftshader");
    swiftshader
        .then_some(SWIFTSHADER_VARIANT)
        .into_iter()
        .chain(TileVariant::ALL)
        .find(|v| Layout::ALL.iter().all(|&l| v.fits(&gpu.limits, l)))
        .unwrap_or(TileVariant::ALL[TileVariant::ALL.len() - 1])
}

/// FNV-1a of the GEMM's sources, the unit GEMM as the trainer composes
/// and spells it, and the variant list: what a choice was timed with.
pub fn shader_hash() -> String {
    let names: Vec<String> = TileVariant::ALL.iter().map(|v| v.name()).collect();
    let sources = [
        COMMON.source,
        LINEAR_B32.source,
        LINEAR_B16.source,
        LINEAR.source,
        UNITS_OPERANDS.source,
    ];
    let units = MatrixUnits::Cooperative { edge: 16 };
    let unit_gemm = GemmVariant::for_units(units, GemmLayout::Nt, false)
        .source(32)
        .unwrap_or_default();
    let texts = sources
        .into_iter()
        .chain([unit_gemm.as_str()])
        .chain(names.iter().map(|n| n.as_str()));
    crate::fingerprint::fnv1a(texts.flat_map(str::bytes))
}

impl GemmKey {
    fn pick(&self, variant: TileVariant, ms: Option<f64>) -> GemmPick {
        GemmPick {
            layout: self.layout.name().into(),
            b: self.b.name().into(),
            m: self.m,
            n: self.n,
            k: self.k,
            variant: variant.name(),
            ms,
            units_ms: None,
        }
    }

    fn of(pick: &GemmPick) -> Option<(GemmKey, TileVariant)> {
        let layout = Layout::ALL.into_iter().find(|l| l.name() == pick.layout)?;
        let b = [BStorage::F32, BStorage::F16]
            .into_iter()
            .find(|b| b.name() == pick.b)?;
        let key = GemmKey::new(layout, b, pick.m, pick.n, pick.k);
        Some((key, TileVariant::parse(&pick.variant)?))
    }
}

/// Whether the device's matrix units serve each product shape the tuner
/// timed them for: faster than its best tile variant.
pub fn unit_picks(gpu: &Gpu) -> HashMap<GemmKey, bool> {
    units_faster(&gpu.kernel_config())
}

fn units_faster(config: &KernelConfig) -> HashMap<GemmKey, bool> {
    config
        .picks
        .iter()
        .filter_map(|p| {
            let faster = p.units_ms? < p.ms.unwrap_or(f64::INFINITY);
            GemmKey::of(p).map(|(key, _)| (key, faster))
        })
        .collect()
}

/// The device's choices that fit it: variant per product shape.
pub fn picks(gpu: &Gpu) -> HashMap<GemmKey, TileVariant> {
    gpu.kernel_config()
        .picks
        .iter()
        .filter_map(GemmKey::of)
        .filter(|(key, v)| v.fits(&gpu.limits, key.layout))
        .collect()
}

/// Chooses a variant for each of `keys` that has none yet: from the cache
/// natively, else by timing every variant that fits, once per adapter —
/// unless the config is pinned, the adapter is a CPU rasterizer or has no
/// timestamps (then `rule` serves). Every variant sums in the same order,
/// so the choice changes speed, never a run's numbers.
/// What was tuned earlier for this adapter, driver and shaders: natively
/// the cache on disk; the page's worker gives its own from storage.
fn cached(adapter: &str, driver: &str, shaders: &str) -> Option<KernelConfig> {
    #[cfg(not(target_arch = "wasm32"))]
    return crate::gpu::kernel_config::cache::load(adapter, driver, shaders);
    #[cfg(target_arch = "wasm32")]
    {
        let _ = (adapter, driver, shaders);
        None
    }
}

pub async fn prepare(gpu: &Gpu, keys: &[GemmKey]) -> Result<()> {
    let mut config = gpu.kernel_config();
    if config.pinned {
        return Ok(());
    }
    let (adapter, shaders) = (gpu.info.name.clone(), shader_hash());
    // the driver's name and version: a new driver may compile other code
    let driver = format!("{} {}", gpu.info.driver, gpu.info.driver_info);
    if (&config.adapter, &config.driver, &config.shaders) != (&adapter, &driver, &shaders) {
        config = cached(&adapter, &driver, &shaders).unwrap_or_else(|| KernelConfig {
            adapter,
            driver,
            shaders,
            picks: Vec::new(),
            pinned: false,
        });
    }
    let known: Vec<GemmKey> = config
        .picks
        .iter()
        .filter_map(GemmKey::of)
        .map(|(k, _)| k)
        .collect();
    let mut missing: Vec<GemmKey> = Vec::new();
    for key in keys {
        if !known.contains(key) && !missing.contains(key) {
            missing.push(*key);
        }
    }
    // shapes chosen earlier without the matrix units this device has (a
    // cached config of a run that did not ask for them): timed on them now
    let units_untimed = match timed_units(gpu) {
        Some(units) => untimed_on_units(&config, keys, units),
        None => Vec::new(),
    };
    let can_time = !gpu.is_software() && gpu.caps.timestamps;
    if can_time && !(missing.is_empty() && units_untimed.is_empty()) {
        let on_units: Vec<GemmKey> = missing.iter().chain(&units_untimed).copied().collect();
        let units = time_units(gpu, &on_units).await?;
        let units_ms = |key: GemmKey| units.iter().find(|(k, _)| *k == key).map(|(_, s)| s * 1e3);
        for pick in config.picks.iter_mut() {
            if let Some((key, _)) = GemmKey::of(pick).filter(|(k, _)| units_untimed.contains(k)) {
                pick.units_ms = units_ms(key);
            }
        }
        for (key, variant, secs) in time_all(gpu, &missing).await? {
            config.picks.push(GemmPick {
                units_ms: units_ms(key),
                ..key.pick(variant, Some(secs * 1e3))
            });
        }
        #[cfg(not(target_arch = "wasm32"))]
        let _ = crate::gpu::kernel_config::cache::store(&config); // unwritable: the next run times again
    }
    *gpu.kernels.lock().unwrap_or_else(|p| p.into_inner()) = config;
    Ok(())
}

/// Every key timed in every variant that fits: each (layout, B storage)'s
/// modules are compiled once and shared by its keys, and the GPU is warmed
/// up once. Returns each key's fastest variant and its seconds.
async fn time_all(gpu: &Gpu, keys: &[GemmKey]) -> Result<Vec<(GemmKey, TileVariant, f64)>> {
    let mut modules: Vec<GemmModule> = Vec::new();
    for key in keys {
        for v in TileVariant::ALL {
            let built = modules
                .iter()
                .any(|m| m.variant == v && m.layout == key.layout && m.b == key.b);
            if v.fits(&gpu.limits, key.layout) && !built {
                modules.push(GemmModule::accumulate_only(gpu, v, key.layout, key.b).await?);
            }
        }
    }
    let mut chosen = Vec::new();
    let mut warm = false;
    for &key in keys {
        let largest = 4 * key.m.max(key.n) as u64 * key.k.max(key.n) as u64;
        if largest > gpu.limits.max_storage_buffer_binding_size {
            continue; // cannot be bound here: such a product fails with the reason when built
        }
        let ops = TimedOperands::new(gpu, key)?;
        let candidates: Vec<&GemmModule> = modules
            .iter()
            .filter(|m| m.layout == key.layout && m.b == key.b)
            .collect();
        let dispatches = candidates
            .iter()
            .map(|m| ops.dispatch(gpu, m))
            .collect::<Result<Vec<_>>>()?;
        if !warm {
            gpu.warm_up(&dispatches.iter().collect::<Vec<_>>(), WARM_UP)
                .await?;
            warm = true;
        }
        let times = time_each(gpu, &dispatches).await?;
        let Some(best) = (0..times.len()).min_by(|&a, &b| times[a].total_cmp(&times[b])) else {
            continue; // no variant fits this adapter: the rule's serves (and fails with the reason)
        };
        chosen.push((key, candidates[best].variant, times[best]));
    }
    Ok(chosen)
}

/// Each key the device's matrix units serve (B in f32, the shape a
/// multiple of the tiles) timed there, its operands' narrowing and gate
/// included: none where the device has none.
async fn time_units(gpu: &Gpu, keys: &[GemmKey]) -> Result<Vec<(GemmKey, f64)>> {
    let Some(u) = timed_units(gpu) else {
        return Ok(Vec::new());
    };
    let keys: Vec<GemmKey> = keys
        .iter()
        .copied()
        .filter(|key| units::serves_shape(u, *key))
        .collect();
    if keys.is_empty() {
        return Ok(Vec::new());
    }
    let units = Units::new(gpu, u, &units::f16_products()).await?;
    let mut times = Vec::new();
    for key in keys {
        let ops = TimedOperands::f16_values(gpu, key)?;
        let (a, b, c) = ((&ops.a).into(), (&ops.b).into(), (&ops.c).into());
        let mut d = Vec::new();
        let shape = (key.m, key.n, key.k);
        match key.layout {
            Layout::Forward => {
                units.forward(gpu, &mut d, (a, b), (Output::Accumulate(c), None), shape)?
            }
            Layout::Dx => units.backward_input(gpu, &mut d, (a, b), (c, true, None), shape)?,
            Layout::Dw => units.backward_weight(gpu, &mut d, (a, b), (c, None), shape)?,
        }
        let d: Vec<&Dispatch> = d.iter().collect();
        gpu.warm_up(&d, WARM_UP / 4.0).await?;
        times.push((key, time_group(gpu, &d).await?));
    }
    Ok(times)
}

/// Those of `keys` that `config` chose a variant for without timing
/// `units`, where the units would run them.
fn untimed_on_units(config: &KernelConfig, keys: &[GemmKey], units: MatrixUnits) -> Vec<GemmKey> {
    config
        .picks
        .iter()
        .filter(|p| p.units_ms.is_none())
        .filter_map(GemmKey::of)
        .map(|(key, _)| key)
        .filter(|key| keys.contains(key) && units::serves_shape(units, *key))
        .collect()
}

/// The device's matrix units, where they are real (emulated ones are
/// never timed: they serve tests, untimed).
fn timed_units(gpu: &Gpu) -> Option<MatrixUnits> {
    match gpu.matrix_units {
        Some(Ok(MatrixUnits::Emulated)) | Some(Err(_)) | None => None,
        Some(Ok(u)) => Some(u),
    }
}

/// Seconds the tuner and the bench keep the GPU busy before timing (0.1
/// s left the H100's first timings up to 5× slow).
const WARM_UP: f64 = 0.4;

/// Each dispatch's GPU seconds: the mean over enough repetitions to fill
/// about 2 ms (Chrome rounds timestamps to 100 µs), at least 3.
async fn time_each(gpu: &Gpu, dispatches: &[Dispatch]) -> Result<Vec<f64>> {
    let mut times = Vec::new();
    for d in dispatches {
        times.push(time_group(gpu, &[d]).await?);
    }
    Ok(times)
}

/// GPU seconds of `group` run in order, timed as `time_each` times one dispatch.
async fn time_group(gpu: &Gpu, group: &[&Dispatch]) -> Result<f64> {
    let once = gpu.time_dispatches(group, 1).await?;
    let reps = (2e-3 / once.max(1e-6)).clamp(3.0, 50.0) as u32;
    gpu.time_dispatches(group, reps).await
}

/// Random operands of one product's shape, reused for every variant timed.
pub struct TimedOperands {
    key: GemmKey,
    a: wgpu::Buffer,
    b: wgpu::Buffer,
    c: wgpu::Buffer,
}

impl TimedOperands {
    pub fn new(gpu: &Gpu, key: GemmKey) -> Result<TimedOperands> {
        Self::drawn(gpu, key, |x| x)
    }

    /// The same draws rounded to f16 values (in f32): what matrix units
    /// multiply, so that their gate runs the product there.
    fn f16_values(gpu: &Gpu, key: GemmKey) -> Result<TimedOperands> {
        Self::drawn(gpu, key, |x| f16::from_f32(x).to_f32())
    }

    fn drawn(gpu: &Gpu, key: GemmKey, round: fn(f32) -> f32) -> Result<TimedOperands> {
        let (m, n, k) = (key.m as u64, key.n as u64, key.k as u64);
        // random (crate::rng::uniform), in [1, 2)
        let random = |len: u64| -> Vec<f32> {
            let v = uniform(&mut SplitMix64(len), len as usize, 1.0, 2.0);
            v.into_iter().map(round).collect()
        };
        let b = match key.b {
            BStorage::F32 => gpu.upload("b", &random(k * n))?,
            // the same draws as f16, two to a word
            BStorage::F16 => {
                let halves: Vec<f16> = random(k * n).into_iter().map(f16::from_f32).collect();
                gpu.upload("b", &halves)?
            }
        };
        Ok(TimedOperands {
            key,
            a: gpu.upload("a", &random(m * k))?,
            b,
            c: gpu.upload("c", &random(m * n))?,
        })
    }
}

impl TimedOperands {
    /// `C += A·B` of these operands in `module`'s variant.
    fn dispatch(&self, gpu: &Gpu, module: &GemmModule) -> Result<Dispatch> {
        let p = Params::of(&self.key, SITE_NONE);
        let buffers = [(&self.a).into(), (&self.b).into(), (&self.c).into()];
        module.launch(gpu, "gemm_tune", Epilogue::Accumulate, p, &buffers)
    }
}

/// GPU seconds of one product of `ops`' shape in each of `variants` (the
/// bench's table of what the tuner chooses from), timed as the tuner does.
pub async fn time_variants(
    gpu: &Gpu,
    variants: &[TileVariant],
    ops: &TimedOperands,
) -> Result<Vec<f64>> {
    let key = ops.key;
    let mut dispatches = Vec::new();
    for &v in variants {
        let module = GemmModule::accumulate_only(gpu, v, key.layout, key.b).await?;
        dispatches.push(ops.dispatch(gpu, &module)?);
    }
    gpu.warm_up(&dispatches.iter().collect::<Vec<_>>(), WARM_UP)
        .await?;
    time_each(gpu, &dispatches).await
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_pick_reads_back_as_its_key_and_variant() {
        for v in TileVariant::ALL {
            for key in [
                GemmKey::new(Layout::Forward, BStorage::F16, 4096, 2304, 768),
                GemmKey::new(Layout::Dw, BStorage::F32, 301, 64, 512),
            ] {
                assert_eq!(GemmKey::of(&key.pick(v, Some(1.5))), Some((key, v)));
            }
        }
        let mut unknown =
            GemmKey::new(Layout::Dx, BStorage::F32, 1, 2, 3).pick(TileVariant::ALL[0], None);
        unknown.variant = "96x96x8/6x6".into();
        assert_eq!(
            GemmKey::of(&unknown),
            None,
            "a variant this build lacks is ignored"
        );
    }

    #[test]
    fn a_pinned_config_round_trips_through_json() {
        let key = GemmKey::new(Layout::Forward, BStorage::F32, 512, 192, 64);
        let config = KernelConfig {
            adapter: "test".into(),
            driver: "1".into(),
            shaders: shader_hash(),
            picks: vec![key.pick(TileVariant::ALL[2], None)],
            pinned: false,
        };
        let pinned = KernelConfig::pinned_from_json(&config.to_json()).unwrap();
        assert!(pinned.pinned);
        assert_eq!(pinned.picks, config.picks);
        assert!(KernelConfig::pinned_from_json("{\"adapter\": 3}").is_err());
    }

    #[test]
    fn matrix_units_serve_the_shapes_they_were_timed_faster_on() {
        let key = |m| GemmKey::new(Layout::Forward, BStorage::F32, m, 768, 768);
        let timed = |m, ms, units_ms| GemmPick {
            units_ms,
            ..key(m).pick(TileVariant::ALL[0], ms)
        };
        let config = KernelConfig {
            adapter: "test".into(),
            driver: "1".into(),
            shaders: shader_hash(),
            picks: vec![
                timed(128, Some(2.0), Some(0.5)),
                timed(256, Some(2.0), Some(3.0)),
                timed(384, Some(2.0), None),
            ],
            pinned: false,
        };
        let faster = units_faster(&config);
        assert_eq!(faster.get(&key(128)), Some(&true));
        assert_eq!(faster.get(&key(256)), Some(&false));
        assert_eq!(faster.get(&key(384)), None, "not timed on units");
        let back = KernelConfig::pinned_from_json(&config.to_json()).unwrap();
        assert_eq!(back.picks, config.picks, "units_ms is kept");
    }

    /// A cached choice made without the units (a run that did not ask for
    /// them) is timed on them when a device has them, where they fit.
    #[test]
    fn choices_made_without_the_units_are_timed_on_them() {
        let units = MatrixUnits::Cooperative { edge: 16 };
        let key = |m, b| GemmKey::new(Layout::Dw, b, m, 768, 512);
        let pick = |m, b, units_ms| GemmPick {
            units_ms,
            ..key(m, b).pick(TileVariant::ALL[0], Some(1.0))
        };
        let config = KernelConfig {
            adapter: "test".into(),
            driver: "1".into(),
            shaders: shader_hash(),
            picks: vec![
                pick(512, BStorage::F32, None),       // untimed on units: timed now
                pick(1024, BStorage::F32, Some(0.3)), // timed already
                pick(96, BStorage::F32, None),        // not a multiple of the 128-row tile
                pick(2048, BStorage::F16, None),      // an f16 mirror: no recipe's operand
                pick(4096, BStorage::F32, None),      // not asked for
            ],
            pinned: false,
        };
        let keys: Vec<GemmKey> = [512, 1024, 96, 2048]
            .into_iter()
            .map(|m| {
                key(
                    m,
                    if m == 2048 {
                        BStorage::F16
                    } else {
                        BStorage::F32
                    },
                )
            })
            .collect();
        assert_eq!(
            untimed_on_units(&config, &keys, units),
            vec![key(512, BStorage::F32)]
        );
    }

    #[test]
    fn the_shader_hash_names_the_sources_and_variants() {
        assert_eq!(shader_hash(), shader_hash());
        assert_eq!(shader_hash().len(), 16);
    }
}
