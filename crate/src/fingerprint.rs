//! FNV-1a (64-bit): tells tokenizers, token streams and shader sources
//! apart. Not cryptographic: it does not defend against forgery.

/// FNV-1a of `bytes`, as 16 hex digits.
pub fn fnv1a(bytes: impl IntoIterator<Item = u8>) -> String {
    let hash = bytes.into_iter().fold(0xcbf2_9ce4_8422_2325u64, |h, b| {
        (h ^ b as u64).wrapping_mul(0x0100_0000_01b3)
    });
    format!("{hash:016x}")
}
