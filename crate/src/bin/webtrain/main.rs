//! The native command-line trainer. JSON lines on stdout, human text on stderr.

#[cfg(not(target_arch = "wasm32"))]
mod bench;
#[cfg(not(target_arch = "wasm32"))]
mod bench_step;
#[cfg(not(target_arch = "wasm32"))]
mod events;
#[cfg(not(target_arch = "wasm32"))]
mod files;
#[cfg(not(target_arch = "wasm32"))]
mod hf;
#[cfg(not(target_arch = "wasm32"))]
mod probe;
#[cfg(not(target_arch = "wasm32"))]
mod quantize;
#[cfg(not(target_arch = "wasm32"))]
mod study;
#[cfg(not(target_arch = "wasm32"))]
mod train;

#[cfg(not(target_arch = "wasm32"))]
pub mod cli {
    use clap::{Args, Parser, Subcommand};
    use webtrain::optim::{MasterWeights, OptimState};
    use webtrain::{Gpu, GpuOptions};

    #[derive(Parser)]
    #[command(
        name = "webtrain",
        version,
        about = "Train a Llama-style language model on WebGPU"
    )]
    struct Cli {
        #[command(subcommand)]
        command: Command,
    }

    #[derive(Subcommand)]
    enum Command {
        /// Report the adapter, its backend, features and limits, and the GEMM variants chosen on it.
        Info(InfoArgs),
        /// Time every kernel at the seed's and the tiny preset's shapes.
        Bench(BenchArgs),
        /// Train a byte-level BPE tokenizer on text files; write tokenizer.json.
        Tokenizer(TokenizerArgs),
        /// Train a model: one JSON line per step, per validation, and a summary.
        Train(Box<crate::train::TrainArgs>),
        /// `train` with every step inspected (unless --inspect-every says otherwise):
        /// per tensor what bf16, f16 or E4M3 would lose, the attention probabilities'
        /// tails, and sf16's / fp8's counters, e.g. `inspect --resume run.safetensors --steps 1`.
        Inspect(Box<crate::train::TrainArgs>),
        /// Write a checkpoint as a Hugging Face Llama folder (transformers loads it).
        ExportHf(crate::hf::ExportArgs),
        /// The next-token loss of a Hugging Face Llama folder on a token sequence, as transformers computes it.
        Eval(crate::hf::EvalArgs),
        /// Continue a prompt with a Hugging Face Llama folder's model (KV-cache decoding).
        Generate(crate::hf::GenerateArgs),
        /// The attention probabilities of every layer and head over a text, as safetensors.
        Attention(crate::probe::AttentionArgs),
        /// At each position of a text, the next token's probability and rank and the most likely tokens (JSON lines).
        Predict(crate::probe::PredictArgs),
        /// Every tensor's log2 histogram, RMS and share outside bf16, f16, E4M3 and Q1.15,
        /// for one forward and backward over a text (JSON lines).
        Ranges(crate::probe::RangesArgs),
        /// Every tensor of a safetensors file through a number format on the GPU
        /// (bf16, f16, FP8, MX, NVFP4), written back as f32: counts and errors per tensor.
        Quantize(crate::quantize::QuantizeArgs),
        /// Every precision × seed (× optimizer state × optimizer) trained as `train` trains it:
        /// the logs, a table of the final validation loss's gap to fp32's (mean ± sd over the
        /// seeds) and its figure, e.g. `study --precisions fp32,nvfp4 --seeds 1,2,3 --out DIR`.
        Study(crate::study::StudyArgs),
    }

    #[derive(Args)]
    struct TokenizerArgs {
        /// UTF-8 text files (.txt, .md) to learn the vocabulary from.
        #[arg(long, required = true, num_args = 1..)]
        corpus: Vec<std::path::PathBuf>,
        /// Vocabulary size, 256..=65536.
        #[arg(long, default_value_t = 16384)]
        vocab: u32,
        /// Where to write tokenizer.json.
        #[arg(long)]
        out: std::path::PathBuf,
    }

    #[derive(Args)]
    struct BenchArgs {
        #[command(flatten)]
        device: DeviceArgs,
        /// Which sizes: seed (d 768, batch 8 × 512), seed-dh128 (the seed with
        /// 6 heads of 128), small, tiny, or all (but seed-dh128).
        #[arg(long, default_value = "all", value_parser = ["seed", "seed-dh128", "small", "tiny", "all"])]
        sizes: String,
        /// What to time: every kernel, whole training steps per preset, or
        /// both; every GEMM in every tile variant (what the tuner picks from);
        /// or a step's time kernel by kernel, per preset and mode (profile);
        /// or f16 GEMMs on cooperative matrices (tensor cores) beside the fp32
        /// GEMM at the seed's shapes, where the adapter offers them (coop).
        #[arg(long, default_value = "all", value_parser = ["kernels", "steps", "all", "variants", "profile", "coop"])]
        what: String,
        /// Presets whose training steps to time (base needs a real GPU).
        #[arg(long, value_delimiter = ',', default_value = "tiny,small")]
        presets: Vec<String>,
        /// Precisions whose steps to time (default: every named one), e.g.
        /// fp32,fp8, or recipe files (FILE.json).
        #[arg(long, value_delimiter = ',')]
        precisions: Vec<String>,
        /// Optimizer states whose steps to time (default: every one), e.g. fp32,int8.
        #[arg(long, value_delimiter = ',')]
        states: Vec<String>,
        /// Optimizers whose steps to time: adamw, muon.
        #[arg(long, value_delimiter = ',', default_value = "adamw")]
        optimizers: Vec<String>,
        /// Master weights whose steps to time: f32, bf16-sr.
        #[arg(long, value_delimiter = ',', default_value = "f32")]
        master_weights: Vec<String>,
        /// Repetitions timed per kernel (after one warm-up).
        #[arg(long, default_value_t = 10)]
        reps: u32,
        /// Only kernels whose name contains this (coop: variants, round 1's
        /// included).
        #[arg(long)]
        only: Option<String>,
    }

    impl BenchArgs {
        /// `--precisions`, every one if none is named.
        fn precisions(&self) -> webtrain::Result<Vec<webtrain::model::Recipe>> {
            match self.precisions.is_empty() {
                true => Ok(webtrain::model::Recipe::all_named()),
                false => self
                    .precisions
                    .iter()
                    .map(|p| match p.ends_with(".json") {
                        true => crate::files::read_recipe(std::path::Path::new(p)),
                        false => webtrain::model::Recipe::named(p),
                    })
                    .collect(),
            }
        }

        /// `--states`, every one if none is named.
        fn states(&self) -> webtrain::Result<Vec<OptimState>> {
            match self.states.is_empty() {
                true => Ok(OptimState::ALL.to_vec()),
                false => self.states.iter().map(|s| OptimState::parse(s)).collect(),
            }
        }
    }

    #[derive(Args)]
    struct InfoArgs {
        #[command(flatten)]
        device: DeviceArgs,
        /// Print the GEMM variants chosen on this adapter as a kernel config
        /// (JSON, for --kernel-config) instead of the report.
        #[arg(long)]
        kernels: bool,
    }

    #[derive(Args)]
    pub struct DeviceArgs {
        /// Use the first adapter whose name contains this (default: $WEBTRAIN_ADAPTER, else the fastest kind).
        #[arg(long)]
        adapter: Option<String>,
        /// Build f16 kernels packed even where shader-f16 exists (default: $WEBTRAIN_F16).
        #[arg(long, value_parser = ["native", "packed"])]
        f16: Option<String>,
        /// Use the GEMM variants of this kernel config (`webtrain info --kernels`
        /// writes one) instead of tuning or the cache: reproducible runs.
        #[arg(long, value_name = "FILE")]
        kernel_config: Option<std::path::PathBuf>,
        /// The recipe's products on matrix units, wherever their operands
        /// are f16 values times a scale (every recipe but fp32, f16 and the
        /// sf16s; a product with a value f16 cannot hold runs on the scalar
        /// GEMM, counted in `products_on_units`): `auto` (default) on the
        /// adapter's cooperative matrices where it offers them (wgpu's
        /// experimental feature) and the tuner timed them faster, `emulated`
        /// in plain code on any adapter with shader-f16 (to check the path),
        /// `off` on the scalar GEMMs.
        #[arg(long, value_parser = ["off", "auto", "emulated"], default_value = "auto")]
        matrix_units: String,
    }

    impl DeviceArgs {
        pub fn options(&self) -> webtrain::Result<GpuOptions> {
            let env = GpuOptions::from_env();
            let kernel_config = match &self.kernel_config {
                None => None,
                Some(path) => {
                    let text = std::fs::read_to_string(path)
                        .map_err(|e| crate::files::io(path, "be read", e))?;
                    Some(webtrain::gpu::KernelConfig::pinned_from_json(&text)?)
                }
            };
            Ok(GpuOptions {
                adapter: self.adapter.clone().or(env.adapter),
                force_packed_f16: self
                    .f16
                    .as_deref()
                    .map_or(env.force_packed_f16, |f| f == "packed"),
                kernel_config,
                matrix_units: webtrain::gpu::UnitsRequest::parse(&self.matrix_units)?,
            })
        }
    }

    pub fn main() -> std::process::ExitCode {
        let cli = Cli::parse();
        match pollster::block_on(run(cli)) {
            Ok(()) => std::process::ExitCode::SUCCESS,
            Err(e) => {
                eprintln!("webtrain: {e}");
                std::process::ExitCode::FAILURE
            }
        }
    }

    async fn run(cli: Cli) -> webtrain::Result<()> {
        match cli.command {
            Command::Info(args) => info(&args).await,
            Command::Tokenizer(args) => tokenizer(&args),
            Command::Train(args) => crate::train::run(*args).await,
            Command::Inspect(args) => crate::train::run(args.inspecting()).await,
            Command::ExportHf(args) => crate::hf::export(&args),
            Command::Eval(args) => crate::hf::eval(&args).await,
            Command::Generate(args) => crate::hf::generate(&args).await,
            Command::Attention(args) => crate::probe::attention(&args).await,
            Command::Predict(args) => crate::probe::predict(&args).await,
            Command::Ranges(args) => crate::probe::ranges(&args).await,
            Command::Quantize(args) => crate::quantize::run(&args).await,
            Command::Study(args) => crate::study::run(&args),
            Command::Bench(args) => {
                if args.what == "coop" {
                    // a device of its own, with the experimental feature
                    return crate::bench::coop::run(
                        &args.device.options()?,
                        args.reps,
                        args.only.as_deref(),
                    )
                    .await;
                }
                let gpu = Gpu::new(&args.device.options()?).await?;
                let sizes: Vec<&crate::bench::Sizes> = match args.sizes.as_str() {
                    "seed" => vec![&crate::bench::SEED],
                    "seed-dh128" => vec![&crate::bench::SEED_DH128],
                    "tiny" => vec![&crate::bench::TINY],
                    "small" => vec![&crate::bench::SMALL],
                    _ => vec![
                        &crate::bench::TINY,
                        &crate::bench::SMALL,
                        &crate::bench::SEED,
                    ],
                };
                let (precisions, states) = (args.precisions()?, args.states()?);
                let optimizers = (args.optimizers.iter())
                    .map(|o| webtrain::optim::OptimizerKind::parse(o))
                    .collect::<webtrain::Result<Vec<_>>>()?;
                let masters = (args.master_weights.iter())
                    .map(|m| MasterWeights::parse(m))
                    .collect::<webtrain::Result<Vec<_>>>()?;
                let runs = crate::bench_step::Runs {
                    presets: &args.presets,
                    precisions: &precisions,
                    optimizers: &optimizers,
                    states: &states,
                    masters: &masters,
                };
                if args.what == "profile" {
                    // a step's own kernels: nothing of the kernel table is needed
                    return crate::bench_step::profile(&gpu, &runs, args.reps).await;
                }
                webtrain::kernels::linear::tune::prepare(&gpu, &crate::bench::gemm_keys(&sizes))
                    .await?;
                let head_dims = crate::bench::head_dims(&sizes);
                let k = webtrain::kernels::Kernels::new(&gpu, &head_dims).await?;
                let copy_bw = crate::bench::copy_bandwidth(&gpu, &k, args.reps).await?;
                eprintln!(
                    "adapter {} — copy bandwidth {:.1} GB/s (the memory limit below)",
                    gpu.info.name,
                    copy_bw / 1e9
                );
                if args.what == "variants" {
                    return crate::bench::variants(&gpu, &sizes, args.only.as_deref()).await;
                }
                if args.what == "kernels" || args.what == "all" {
                    crate::bench::run(&gpu, &k, copy_bw, &sizes, args.reps, args.only.as_deref())
                        .await?;
                }
                if args.what != "kernels" {
                    crate::bench_step::run(&gpu, &runs, args.reps, copy_bw).await?;
                }
                Ok(())
            }
        }
    }

    fn tokenizer(args: &TokenizerArgs) -> webtrain::Result<()> {
        let files: Vec<_> = args
            .corpus
            .iter()
            .map(|p| crate::files::TextFile::given(p))
            .collect();
        let corpus = crate::files::read_corpus(&files)?;
        let texts: Vec<&str> = corpus.files().map(|(_, t)| t).collect();
        let started = std::time::Instant::now();
        let t = webtrain::data::Tokenizer::train(&texts, args.vocab, |_| {})?;
        let json = t.to_json()?;
        std::fs::write(&args.out, json)
            .map_err(|e| crate::files::io(&args.out, "be written", e))?;
        let secs = started.elapsed().as_secs_f64();
        eprintln!(
            "tokenizer: {} tokens from {} bytes in {secs:.1} s, fingerprint {}",
            t.vocab_size(),
            corpus.bytes(),
            t.fingerprint()
        );
        let line = serde_json::json!({"vocab_size": t.vocab_size(), "fingerprint": t.fingerprint(), "seconds": secs, "out": args.out});
        println!("{line}");
        Ok(())
    }

    async fn info(args: &InfoArgs) -> webtrain::Result<()> {
        let gpu = Gpu::new(&args.device.options()?).await?;
        webtrain::kernels::linear::tune::prepare(&gpu, &[]).await?;
        let config = gpu.kernel_config();
        if args.kernels {
            println!("{}", config.to_json());
            return Ok(());
        }
        let r = gpu.report();
        let mib = |b: u64| b as f64 / (1024.0 * 1024.0);
        eprintln!(
            "adapter  {} ({}, {}) {}",
            r.name, r.backend, r.device_type, r.driver
        );
        eprintln!("f16      {}", r.mixed_precision);
        eprintln!("timing   {}", r.timing);
        eprintln!(
            "subgroups {}",
            if r.features.subgroups {
                "yes (native kernels may use them)"
            } else {
                "no"
            }
        );
        eprintln!(
            "limits   buffer {:.0} MiB, storage binding {:.0} MiB, {} storage buffers/stage, {} B workgroup memory",
            mib(r.limits.max_buffer_size),
            mib(r.limits.max_storage_buffer_binding_size),
            r.limits.max_storage_buffers_per_shader_stage,
            r.limits.max_compute_workgroup_storage_size
        );
        eprintln!(
            "gemm     {} shape(s) {}, others {}",
            config.picks.len(),
            if config.pinned {
                "pinned by --kernel-config"
            } else {
                "timed on this adapter (cached)"
            },
            webtrain::kernels::linear::tune::rule(&gpu).name()
        );
        let line =
            serde_json::to_string(&r).map_err(|e| webtrain::Error::Unsupported(e.to_string()))?;
        println!("{line}");
        Ok(())
    }
}

#[cfg(not(target_arch = "wasm32"))]
fn main() -> std::process::ExitCode {
    cli::main()
}

// The CLI is native only; wasm32 builds (wasm-pack test) still compile bins.
#[cfg(target_arch = "wasm32")]
fn main() {}
