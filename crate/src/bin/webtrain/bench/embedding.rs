//! The token embedding: lookup, and the backward over sorted token runs.

use webtrain::Result;
use webtrain::kernels::embedding::TokenRuns;
use webtrain::kernels::{EmbeddingShape, Weights};

use super::{Case, Cases, Ctx};

pub(super) fn cases<'a>(c: Ctx<'a>) -> Cases<'a> {
    c.cases(&[("embed lookup", lookup), ("embed backward", backward)])
}

fn shape(c: Ctx) -> EmbeddingShape {
    EmbeddingShape {
        tokens: c.s.rows(),
        d: c.s.d,
        vocab: c.s.vocab,
    }
}

fn lookup(c: Ctx) -> Result<Case> {
    let (rows, d, vocab) = (c.s.rows(), c.s.d, c.s.vocab);
    let t = c.gpu.upload("tokens", &c.tokens())?;
    let [table, emb, bad] = c.bufs([("table", vocab * d), ("emb", rows * d), ("bad", 1)])?;
    let table = Weights::F32((&table).into());
    let dispatch = c.k.embed.lookup(
        c.gpu,
        shape(c),
        (&t).into(),
        table,
        (&emb).into(),
        (&bad).into(),
    )?;
    let bytes = 8.0 * rows as f64 * d as f64;
    Ok(Case::memory(format!("{rows}x{d}"), bytes, vec![dispatch]))
}

/// dtable += the rows of dout, summed per token over its sorted runs.
fn backward(c: Ctx) -> Result<Case> {
    let (rows, d, vocab) = (c.s.rows(), c.s.d, c.s.vocab);
    let runs = TokenRuns::new(&c.tokens(), vocab).to_words();
    let t = c.gpu.upload("token_runs", &runs)?;
    let [table, dout] = c.bufs([("dtable", vocab * d), ("dout", rows * d)])?;
    let (t, dout, table) = ((&t).into(), (&dout).into(), (&table).into());
    let dispatch = c.k.embed.backward_sorted(c.gpu, shape(c), t, dout, table)?;
    let bytes = 12.0 * rows as f64 * d as f64;
    Ok(Case::memory(format!("{rows}x{d}"), bytes, vec![dispatch]))
}
