//! Running the built `webtrain` binary: the helpers tests/cli.rs and
//! tests/probe.rs share.

use std::ffi::OsStr;
use std::fmt::Debug;
use std::path::PathBuf;
use std::process::{Command, Output};

/// `webtrain args…`, run to its end.
pub fn webtrain_output<S: AsRef<OsStr> + Debug>(args: &[S]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_webtrain"))
        .args(args)
        .output()
        .expect("run webtrain")
}

/// The stdout of `webtrain args…`, which must succeed.
pub fn webtrain_stdout<S: AsRef<OsStr> + Debug>(args: &[S]) -> String {
    let out = webtrain_output(args);
    assert!(
        out.status.success(),
        "webtrain {args:?} failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).expect("utf-8 stdout")
}

/// The stderr of `webtrain args…`, which must fail.
pub fn refused<S: AsRef<OsStr> + Debug>(args: &[S]) -> String {
    let out = webtrain_output(args);
    assert!(!out.status.success(), "{args:?} must be refused");
    String::from_utf8_lossy(&out.stderr).to_string()
}

/// A fresh folder `webtrain-NAME-PID` in the temporary directory.
pub fn scratch_dir(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("webtrain-{name}-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    dir
}
