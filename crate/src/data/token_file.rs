//! A tokenized corpus on disk: magic, version, the tokenizer's fingerprint,
//! then the ids. Loading with another tokenizer is refused.

use crate::data::Tokenizer;
use crate::error::{Error, Result};

const MAGIC: &[u8; 8] = b"WTTOKENS";
const VERSION: u32 = 1;
const HEADER: usize = 8 + 4 + 16 + 8;

/// `tokens` made with `tokenizer`, as the bytes of a token file.
pub fn write(tokenizer: &Tokenizer, tokens: &[u32]) -> Vec<u8> {
    let mut out = Vec::with_capacity(HEADER + 4 * tokens.len());
    out.extend_from_slice(MAGIC);
    out.extend_from_slice(&VERSION.to_le_bytes());
    out.extend_from_slice(tokenizer.fingerprint().as_bytes());
    out.extend_from_slice(&(tokens.len() as u64).to_le_bytes());
    out.extend(tokens.iter().flat_map(|t| t.to_le_bytes()));
    out
}

/// The ids of a token file `name`, if `tokenizer` is the one that made it.
pub fn read(name: &str, bytes: &[u8], tokenizer: &Tokenizer) -> Result<Vec<u32>> {
    let bad = |problem: &str| Error::Corpus {
        file: name.to_string(),
        problem: problem.to_string(),
    };
    if bytes.len() < HEADER || &bytes[..8] != MAGIC {
        return Err(bad("is not a webtrain token file"));
    }
    let version = u32::from_le_bytes(
        bytes[8..12]
            .try_into()
            .map_err(|_| bad("truncated header"))?,
    );
    if version != VERSION {
        return Err(bad(&format!(
            "is token file version {version}; this webtrain reads version {VERSION}"
        )));
    }
    let made_with = std::str::from_utf8(&bytes[12..28])
        .map_err(|_| bad("has a corrupt tokenizer fingerprint"))?;
    tokenizer.check_fingerprint(name, made_with)?;
    let count = u64::from_le_bytes(
        bytes[28..36]
            .try_into()
            .map_err(|_| bad("truncated header"))?,
    );
    let body = &bytes[HEADER..];
    // in u64, and 4·count never formed: a count near 2^62 (2^30 in wasm32's usize) would overflow
    if !body.len().is_multiple_of(4) || (body.len() / 4) as u64 != count {
        return Err(bad(&format!(
            "is truncated or padded: header says {count} tokens, {} bytes follow",
            body.len()
        )));
    }
    Ok(body
        .chunks_exact(4)
        .map(|c| u32::from_le_bytes([c[0], c[1], c[2], c[3]]))
        .collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trips_and_refuses_other_tokenizers_and_damage() {
        let text = "one two three one two three four five";
        let a = Tokenizer::train(&[text], 270, |_| {}).unwrap();
        let b = Tokenizer::train(&[text], 260, |_| {}).unwrap();
        let ids = a.encode(text).unwrap();
        let file = write(&a, &ids);
        assert_eq!(read("t.bin", &file, &a).unwrap(), ids);
        let err = read("t.bin", &file, &b).unwrap_err().to_string();
        assert!(
            err.contains(a.fingerprint()) && err.contains(b.fingerprint()),
            "{err}"
        );
        assert!(
            read("t.bin", &file[..file.len() - 2], &a)
                .unwrap_err()
                .to_string()
                .contains("truncated")
        );
        // a count whose byte size overflows: refused, not a panic
        let mut huge = file.clone();
        huge[28..36].copy_from_slice(&(1u64 << 62).to_le_bytes());
        assert!(
            read("t.bin", &huge, &a)
                .unwrap_err()
                .to_string()
                .contains("header says 4611686018427387904 tokens")
        );
        assert!(
            read("t.bin", b"PK\x03\x04 a zip file, not tokens......", &a)
                .unwrap_err()
                .to_string()
                .contains("not a webtrain token file")
        );
    }
}
