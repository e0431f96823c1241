//! What the GEMM tuner learned about an adapter (kernels/linear/tune.rs
//! fills and reads it): for each product shape, the tile variant that ran
//! fastest. Kept with the device handle, so every model made on it reuses
//! the choice; natively also in a cache file, in the page in the origin's
//! storage (the page passes it in and reads it back); pinned from a file
//! (`--kernel-config`) for reproducible runs.

use serde::{Deserialize, Serialize};

use crate::error::{Error, Result};

/// The tuner's choices on one adapter, driver and set of GEMM shaders.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct KernelConfig {
    pub adapter: String,
    pub driver: String,
    /// Hash of the GEMM shaders and variant list the choices were timed
    /// with: choices made for other kernels are not reused.
    pub shaders: String,
    pub picks: Vec<GemmPick>,
    /// Given by the user: used as it is, nothing timed or added.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub pinned: bool,
}

/// The variant chosen for one product shape.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct GemmPick {
    /// `forward`, `dx` or `dw`.
    pub layout: String,
    /// B's storage: `f32` or `f16`.
    pub b: String,
    pub m: u32,
    pub n: u32,
    pub k: u32,
    /// e.g. `128x128x8/8x8` (kernels::linear::TileVariant::name).
    pub variant: String,
    /// Its GPU time when it was chosen, if timed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ms: Option<f64>,
    /// The same product's time on the device's matrix units (f16 products,
    /// kernels::linear::units), where they were timed: they serve it if
    /// faster.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub units_ms: Option<f64>,
}

impl KernelConfig {
    /// A config pinned from JSON (`--kernel-config FILE`, the page's setting).
    pub fn pinned_from_json(text: &str) -> Result<KernelConfig> {
        let mut c: KernelConfig = serde_json::from_str(text).map_err(|e| {
            Error::Unsupported(format!(
                "kernel config: {e} (write one with `webtrain info --kernels`)"
            ))
        })?;
        c.pinned = true;
        Ok(c)
    }

    pub fn to_json(&self) -> String {
        serde_json::to_string_pretty(self).unwrap_or_default()
    }
}

/// The native cache: every adapter's config in one JSON file under the
/// user's cache directory ($WEBTRAIN_CACHE_DIR, else $XDG_CACHE_HOME/webtrain,
/// else ~/.cache/webtrain, %LOCALAPPDATA%\webtrain on Windows).
#[cfg(not(target_arch = "wasm32"))]
pub mod cache {
    use std::path::PathBuf;

    use super::KernelConfig;

    pub fn path() -> Option<PathBuf> {
        let var = |k: &str| {
            std::env::var_os(k)
                .filter(|v| !v.is_empty())
                .map(PathBuf::from)
        };
        let dir = var("WEBTRAIN_CACHE_DIR")
            .or_else(|| var("XDG_CACHE_HOME").map(|d| d.join("webtrain")))
            .or_else(|| var("LOCALAPPDATA").map(|d| d.join("webtrain")))
            .or_else(|| var("HOME").map(|d| d.join(".cache").join("webtrain")))?;
        Some(dir.join("kernels.json"))
    }

    fn read_all() -> Vec<KernelConfig> {
        path()
            .and_then(|p| std::fs::read_to_string(p).ok())
            .and_then(|t| serde_json::from_str(&t).ok())
            .unwrap_or_default()
    }

    /// The cached config of this adapter, driver and shader hash.
    pub fn load(adapter: &str, driver: &str, shaders: &str) -> Option<KernelConfig> {
        read_all()
            .into_iter()
            .find(|c| c.adapter == adapter && c.driver == driver && c.shaders == shaders)
    }

    /// Replaces this adapter's entry. A cache that cannot be written only
    /// means the next run times again: the error is returned for a caller
    /// that wants to say so.
    pub fn store(config: &KernelConfig) -> std::io::Result<()> {
        let Some(path) = path() else {
            return Ok(());
        };
        let mut all = read_all();
        all.retain(|c| c.adapter != config.adapter || c.driver != config.driver);
        all.push(config.clone());
        if let Some(dir) = path.parent() {
            std::fs::create_dir_all(dir)?;
        }
        let text = serde_json::to_string_pretty(&all).map_err(std::io::Error::other)?;
        let tmp = path.with_extension("json.tmp");
        std::fs::write(&tmp, text)?;
        std::fs::rename(tmp, path)
    }
}
