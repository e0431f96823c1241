//! A run saved after 3 steps and resumed in a new trainer goes on exactly
//! as the run that never stopped: the same losses, step numbers, rates,
//! weights and optimizer state, to the bit.

use webtrain::checkpoint::{self, Checkpoint, RunState};
use webtrain::data::Dataset;
use webtrain::model::{ParamLayout, Recipe};
use webtrain::optim::{HostState, OptimState, OptimizerKind};
use webtrain::rng::SplitMix64;
use webtrain::train::synthetic::markov_tokens;
use webtrain::train::{StepStats, TrainConfig, Trainer};
use webtrain::{Error, Gpu, Result};

use super::model::tiny_run;

const STEPS: u32 = 6;
const SAVED_AT: u32 = 3;

fn config(precision: Recipe, state: OptimState) -> Result<TrainConfig> {
    // warm-up and cosine: a resumed step that forgot its number would train at another rate
    tiny_run(precision, state, (2, STEPS), 5)
}

/// Batches as the CLI draws them: random windows of a token stream.
fn dataset(c: &TrainConfig) -> Result<Dataset> {
    Dataset::new(
        markov_tokens(c.model.vocab, 20_000, c.seed),
        c.shape.seq as usize,
        0.0,
    )
}

/// `n` steps on batches from `rng`; the stats of those that completed.
async fn train(
    t: &mut Trainer,
    data: &Dataset,
    rng: &mut SplitMix64,
    n: u32,
) -> Result<Vec<StepStats>> {
    let mut stats = Vec::new();
    for _ in 0..n {
        stats.extend(
            t.step(&data.train_batch(rng, t.config.shape.batch as usize))
                .await?,
        );
    }
    Ok(stats)
}

fn bits(xs: &[f32]) -> Vec<u32> {
    xs.iter().map(|x| x.to_bits()).collect()
}

fn state_bits(s: &HostState) -> Vec<u32> {
    match s {
        HostState::Fp32 { m, v } => [bits(m), bits(v)].concat(),
        HostState::Bf16 { m, v } => m.iter().chain(v).map(|&b| b as u32).collect(),
        HostState::Bytes {
            code: _,
            m_codes,
            v_codes,
            m_scales,
            v_scales,
        } => [
            m_codes.iter().chain(v_codes).map(|&b| b as u32).collect(),
            bits(m_scales),
            bits(v_scales),
        ]
        .concat(),
    }
}

fn stat_bits(s: &[StepStats]) -> Vec<(u32, u32, u32, u64)> {
    s.iter()
        .map(|x| {
            (
                x.step,
                x.loss.to_bits(),
                x.grad_norm.to_bits(),
                x.lr.to_bits(),
            )
        })
        .collect()
}

async fn resumes_exactly(
    gpu: &Gpu,
    precision: Recipe,
    (optimizer, state): (OptimizerKind, OptimState),
) -> Result<()> {
    let mut c = config(precision.clone(), state)?;
    c.optim.optimizer = optimizer;
    let data = dataset(&c)?;
    let what = format!(
        "{} precision, {} with {} state",
        precision.name(),
        optimizer.name(),
        state.name()
    );

    let mut whole = Trainer::new(gpu, c.clone()).await?;
    let mut rng = SplitMix64(c.seed);
    let mut want = train(&mut whole, &data, &mut rng, STEPS).await?;
    want.extend(whole.flush().await?);
    let want_weights = whole.model.read_weights(gpu).await?;
    let want_state = whole.optimizer.read_state(gpu).await?;
    drop(whole);

    // saved with steps still in flight: their stats stay the caller's to collect
    let mut first = Trainer::new(gpu, c.clone()).await?;
    let mut rng = SplitMix64(c.seed);
    let mut before = train(&mut first, &data, &mut rng, SAVED_AT).await?;
    let bytes = checkpoint::save(
        &first,
        &RunState {
            rng: rng.0,
            tokenizer_json: None,
            data: Some("synthetic".into()),
        },
    )
    .await?;
    before.extend(first.flush().await?);
    assert_eq!(
        stat_bits(&before),
        stat_bits(&want[..SAVED_AT as usize]),
        "{what}: the first {SAVED_AT} steps"
    );
    drop(first);

    let (mut resumed, run) = checkpoint::load(gpu, &bytes).await?;
    assert_eq!(
        (resumed.steps(), &resumed.config, run.data.as_deref()),
        (SAVED_AT, &c, Some("synthetic"))
    );
    assert!(
        checkpoint::save(&resumed, &run).await? == bytes,
        "{what}: a loaded checkpoint saves to the same bytes"
    );
    let mut rng = SplitMix64(run.rng);
    let mut after = train(&mut resumed, &data, &mut rng, STEPS - SAVED_AT).await?;
    after.extend(resumed.flush().await?);
    assert_eq!(
        after.iter().map(|s| s.step).collect::<Vec<_>>(),
        (SAVED_AT + 1..=STEPS).collect::<Vec<_>>(),
        "{what}: step numbers go on"
    );
    assert_eq!(
        stat_bits(&after),
        stat_bits(&want[SAVED_AT as usize..]),
        "{what}: steps {}..={STEPS}: step, loss, grad norm, lr",
        SAVED_AT + 1
    );
    assert!(
        bits(&resumed.model.read_weights(gpu).await?) == bits(&want_weights),
        "{what}: final weights, to the bit"
    );
    assert!(
        state_bits(&resumed.optimizer.read_state(gpu).await?) == state_bits(&want_state),
        "{what}: final optimizer state, to the bit"
    );
    Ok(())
}

pub async fn checkpoint_resumes_bit_identically_f16_fp32_state(gpu: &Gpu) -> Result<()> {
    resumes_exactly(gpu, Recipe::f16(), (OptimizerKind::Adamw, OptimState::Fp32)).await
}

pub async fn checkpoint_resumes_bit_identically_int8_state(gpu: &Gpu) -> Result<()> {
    resumes_exactly(gpu, Recipe::f16(), (OptimizerKind::Adamw, OptimState::Int8)).await
}

/// Muon's momentum (8-bit, in m at the matrices' offsets) and AdamW's
/// moments of the rest resume to the bit.
pub async fn checkpoint_resumes_bit_identically_muon(gpu: &Gpu) -> Result<()> {
    resumes_exactly(gpu, Recipe::f16(), (OptimizerKind::Muon, OptimState::Int8)).await
}

/// A checkpoint whose batch the adapter cannot hold is refused with the
/// limit; one made with another tokenizer, naming both fingerprints.
pub async fn checkpoint_load_refuses_what_it_cannot_use(gpu: &Gpu) -> Result<()> {
    let mut c = config(Recipe::fp32(), OptimState::Fp32)?;
    let layout = ParamLayout::new(&c.model);
    let zeros = vec![0.0f32; layout.total as usize];
    let mut ck = Checkpoint {
        config: c.clone(),
        step: 0,
        run: RunState::default(),
        tokenizer_fingerprint: None,
        weights: layout.initial_weights(c.seed),
        state: HostState::Fp32 {
            m: zeros.clone(),
            v: zeros,
        },
        loss_scale: None,
    };
    match checkpoint::load_checked(gpu, &ck.to_bytes()?, "0123456789abcdef").await {
        Err(e @ Error::TokenizerMismatch { .. }) => assert!(
            e.to_string().contains("0123456789abcdef") && e.to_string().contains("none"),
            "{e}"
        ),
        other => panic!(
            "a checkpoint of synthetic tokens loaded with a tokenizer: {:?}",
            other.err()
        ),
    }
    // rows·D·4 bytes of one activation beyond the largest buffer, rows within 32 bits
    let limit = gpu.limits.max_buffer_size;
    let rows = limit / (4 * c.model.d_model as u64) + 1;
    if rows.div_ceil(c.shape.seq as u64) * c.shape.seq as u64 <= u32::MAX as u64 {
        c.shape.batch = rows.div_ceil(c.shape.seq as u64) as u32;
        ck.config = c;
        match checkpoint::load(gpu, &ck.to_bytes()?).await {
            Err(e @ Error::Checkpoint(_)) => assert!(
                e.to_string().contains("cannot hold") && e.to_string().contains(&limit.to_string()),
                "{e}"
            ),
            other => panic!(
                "a batch beyond the adapter's buffers was loaded: {:?}",
                other.err()
            ),
        }
    }
    Ok(())
}
