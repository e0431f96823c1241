//! The native CLI's machine-readable output: JSON lines on stdout.
#![cfg(not(target_arch = "wasm32"))]

use std::process::Command;

fn run(args: &[&str]) -> Vec<serde_json::Value> {
    let out = Command::new(env!("CARGO_BIN_EXE_webtrain")).args(args).output().expect("run webtrain");
    assert!(out.status.success(), "webtrain {args:?} failed: {}", String::from_utf8_lossy(&out.stderr));
    String::from_utf8(out.stdout)
        .expect("utf-8 stdout")
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("not a JSON line: {l:?}: {e}")))
        .collect()
}

#[test]
fn info_prints_the_adapter_report() {
    let lines = run(&["info"]);
    assert_eq!(lines.len(), 1);
    assert!(lines[0]["name"].as_str().is_some_and(|n| !n.is_empty()));
    assert!(lines[0]["limits"]["max_storage_buffer_binding_size"].as_u64().is_some_and(|b| b > 0));
    assert!(matches!(lines[0]["f16_storage"].as_str(), Some("native" | "packed")));
}

#[test]
fn bench_prints_one_line_per_kernel() {
    let lines = run(&["bench", "--sizes", "tiny", "--reps", "1", "--only", "rmsnorm"]);
    let kernels: Vec<&str> = lines.iter().filter_map(|l| l["kernel"].as_str()).collect();
    assert_eq!(kernels, ["rmsnorm forward", "rmsnorm backward"]);
    assert!(lines.iter().all(|l| l["ms"].as_f64().is_some_and(|ms| ms > 0.0)));
}

#[test]
fn a_missing_adapter_is_a_clear_error() {
    let out = Command::new(env!("CARGO_BIN_EXE_webtrain")).args(["info", "--adapter", "no-such-gpu"]).output().expect("run");
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("no GPU adapter named like \"no-such-gpu\""), "{err}");
}
