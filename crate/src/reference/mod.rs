//! CPU twins of the kernels: plain loops, f64 arithmetic, one function per
//! kernel. Tests in every tier and the parity checks compare against these.

pub mod cast;
pub mod infrastructure;
