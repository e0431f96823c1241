//! What each op computes, shared by its GPU kernel and its CPU twin (and
//! nothing else): shapes, AdamW's settings and 8-bit code tables, the
//! loss scale's settings and state, the formats' constants. `kernels/` and
//! `reference/` both import from here, never from each other.

pub mod adam;
pub mod formats;
pub mod histogram;
pub mod loss_scale;
pub mod muon;
pub mod products;
pub mod shapes;
