//! `switchyard-check conform …` run as an operator runs it, for the conform CLI tests.

use std::io::Write;
use std::process::{Command, Stdio};

/// Runs `switchyard-check conform ARGS`, `stdin` (if any) on its standard input: the exit
/// code (-1 for a signal), stdout and stderr.
pub fn conform(args: &[&str], stdin: Option<&str>) -> (i32, String, String) {
    let mut child = Command::new(env!("CARGO_BIN_EXE_switchyard-check"))
        .arg("conform")
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("run switchyard-check conform");
    let mut input = child.stdin.take().expect("stdin");
    if let Some(text) = stdin {
        input.write_all(text.as_bytes()).expect("write stdin");
    }
    drop(input);
    let output = child.wait_with_output().expect("wait");
    (
        output.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&output.stdout).into_owned(),
        String::from_utf8_lossy(&output.stderr).into_owned(),
    )
}
