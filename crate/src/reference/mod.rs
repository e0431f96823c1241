//! CPU twins of the kernels: plain loops, f64 arithmetic, one function per
//! kernel. Tests in every tier and the parity checks compare against these.
//! Row and model kernels' twins take and return f64 so their backwards can
//! be proven against finite differences of their forwards (`gradcheck`).

pub mod activation;
pub mod attention;
pub mod cast;
pub mod embedding;
pub mod formats;
#[cfg(test)]
pub(crate) mod gradcheck;
pub mod histogram;
pub mod infrastructure;
pub mod linear;
pub mod loss;
pub mod model;
pub mod muon;
pub mod norm;
pub mod optimizer;
pub mod quantize;
pub mod rope;
pub mod units;
