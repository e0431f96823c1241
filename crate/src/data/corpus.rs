//! The user's text: each file checked before it joins the corpus, so a bad
//! file is refused by name and nothing already loaded is lost.

use super::Tokenizer;
use crate::error::{Error, Result};

/// Control characters (other than tab, newlines, form feed) above this share
/// of a file's first 64 KiB mark it as binary.
const MAX_CONTROL_SHARE: f64 = 0.01;

#[derive(Default)]
pub struct Corpus {
    files: Vec<(String, String)>,
}

impl Corpus {
    /// Adds a file's contents after `check_text`; on error the corpus is unchanged.
    pub fn add(&mut self, name: &str, bytes: &[u8]) -> Result<()> {
        let text = check_text(name, bytes)?;
        self.files.push((name.to_string(), text.to_string()));
        Ok(())
    }

    pub fn files(&self) -> impl Iterator<Item = (&str, &str)> {
        self.files.iter().map(|(n, t)| (n.as_str(), t.as_str()))
    }

    pub fn bytes(&self) -> usize {
        self.files.iter().map(|(_, t)| t.len()).sum()
    }

    pub fn is_empty(&self) -> bool {
        self.files.is_empty()
    }

    /// Every file's tokens, in order, each file long enough for one
    /// training window of `seq + 1` (else refused by name).
    pub fn tokenize(&self, tokenizer: &Tokenizer, seq: usize) -> Result<Vec<u32>> {
        let mut all = Vec::new();
        for (name, text) in self.files() {
            let ids = tokenizer.encode(text)?;
            check_long_enough(name, ids.len(), seq)?;
            all.extend(ids);
        }
        Ok(all)
    }
}

/// The file as text, or why it cannot be training text: empty (or only
/// whitespace), binary (NUL bytes or many control characters), or not UTF-8.
pub fn check_text<'a>(name: &str, bytes: &'a [u8]) -> Result<&'a str> {
    let refuse = |problem: String| {
        Err(Error::Corpus {
            file: name.to_string(),
            problem,
        })
    };
    let head = &bytes[..bytes.len().min(64 * 1024)];
    if head.contains(&0) {
        return refuse("looks binary (it contains NUL bytes); give plain .txt or .md text".into());
    }
    let controls = head
        .iter()
        .filter(|&&b| b < 0x20 && !matches!(b, b'\t' | b'\n' | b'\r' | 0x0c))
        .count();
    if controls as f64 > MAX_CONTROL_SHARE * head.len() as f64 {
        return refuse(format!(
            "looks binary ({controls} control characters in its first {} bytes)",
            head.len()
        ));
    }
    let text = match std::str::from_utf8(bytes) {
        Ok(text) => text,
        Err(e) => {
            return refuse(format!(
                "is not valid UTF-8 (first bad byte at offset {}); save it as UTF-8",
                e.valid_up_to()
            ));
        }
    };
    if text.trim().is_empty() {
        return refuse("is empty".into());
    }
    Ok(text)
}

/// Refuses a file whose tokens cannot fill one training window of `seq + 1`.
pub fn check_long_enough(name: &str, tokens: usize, seq: usize) -> Result<()> {
    if tokens < seq + 1 {
        return Err(Error::Corpus {
            file: name.to_string(),
            problem: format!(
                "has {tokens} tokens, fewer than one training sequence needs ({} for seq {seq})",
                seq + 1
            ),
        });
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn problem(name: &str, bytes: &[u8]) -> String {
        let mut c = Corpus::default();
        c.add("good.txt", b"some real text").unwrap();
        let err = c.add(name, bytes).unwrap_err().to_string();
        assert_eq!(
            c.files().count(),
            1,
            "a refused file must not disturb what was loaded"
        );
        assert!(err.starts_with(name), "the message names the file: {err}");
        err
    }

    #[test]
    fn bad_files_are_refused_by_name() {
        assert!(problem("empty.txt", b"").contains("empty"));
        assert!(problem("blank.md", b" \n\t\n ").contains("empty"));
        assert!(problem("image.png", b"\x89PNG\r\n\x1a\n\0\0\0\rIHDR").contains("binary"));
        assert!(
            problem("latin1.txt", b"caf\xe9 au lait")
                .contains("not valid UTF-8 (first bad byte at offset 3)")
        );
        assert!(problem("controls.txt", &[b'a', 1, 2, 3, 4, 5, b'b']).contains("binary"));
    }

    #[test]
    fn real_text_is_accepted() {
        let mut c = Corpus::default();
        c.add("tr.txt", "Çok güzel bir gün. İyi akşamlar! 🐈".as_bytes())
            .unwrap();
        c.add("notes.md", b"# Title\r\n\ttabbed\x0cpage").unwrap();
        assert_eq!(c.files().count(), 2);
    }

    #[test]
    fn files_too_short_for_a_sequence_are_refused() {
        assert!(
            check_long_enough("short.txt", 64, 64)
                .unwrap_err()
                .to_string()
                .contains("short.txt: has 64 tokens")
        );
        assert!(check_long_enough("ok.txt", 65, 64).is_ok());
    }
}
