//! Progress bars for long work (import, replay, rebuild), drawn on stderr only when it
//! is a terminal; in logs and pipes they stay silent.

use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};

/// A bar counting `total` units of `what` (e.g. "bytes", "jobs").
pub fn bar(total: u64, what: &str) -> ProgressBar {
    let pb = ProgressBar::with_draw_target(Some(total), ProgressDrawTarget::stderr());
    let template = if what == "bytes" {
        "{msg} [{elapsed_precise}] {wide_bar} {bytes}/{total_bytes} ({bytes_per_sec}, {eta})"
            .to_string()
    } else {
        format!(
            "{{msg}} [{{elapsed_precise}}] {{wide_bar}} {{human_pos}}/{{human_len}} {what} ({{per_sec}}, {{eta}})"
        )
    };
    pb.set_style(
        ProgressStyle::with_template(&template)
            .expect("progress template is valid")
            .progress_chars("=> "),
    );
    pb
}
