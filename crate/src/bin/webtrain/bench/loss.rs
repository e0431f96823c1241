//! Cross-entropy over the vocabulary, forward and backward in one pass.

use webtrain::Result;
use webtrain::kernels::loss::{CrossEntropy, IGNORE_INDEX};

use super::{Case, Cases, Ctx};

pub(super) fn cases<'a>(c: Ctx<'a>) -> Cases<'a> {
    c.cases(&[("cross-entropy fwd+bwd", forward_backward)])
}

fn forward_backward(c: Ctx) -> Result<Case> {
    let (rows, vocab, targets) = (c.s.rows(), c.s.vocab, c.tokens());
    let ce = CrossEntropy::mean(&targets, vocab, IGNORE_INDEX);
    let t = c.gpu.upload("targets", &targets)?;
    let [logits, losses, lse] =
        c.bufs([("logits", rows * vocab), ("losses", rows), ("lse", rows)])?;
    let (logits, losses, lse) = ((&logits).into(), (&losses).into(), (&lse).into());
    let d =
        c.k.loss
            .cross_entropy_forward_backward(c.gpu, &ce, (&t).into(), logits, losses, lse)?;
    // logits read twice (online max and sums, then dlogits), written once
    let bytes = 12.0 * rows as f64 * vocab as f64;
    Ok(Case::memory(format!("{rows}x{vocab}"), bytes, vec![d]))
}
