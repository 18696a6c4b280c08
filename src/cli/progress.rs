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

/// Reads a whole SWF trace (plain or gzipped), drawing a bar over the file's bytes.
pub fn read_swf(path: &std::path::Path) -> anyhow::Result<crate::trace::swf::SwfTrace> {
    use anyhow::Context;
    let len = std::fs::metadata(path)
        .with_context(|| format!("{}: cannot open", path.display()))?
        .len();
    let pb = bar(len, "bytes");
    pb.set_message("reading");
    let counted = pb.clone();
    let input = crate::trace::swf::open(path, move |f| counted.wrap_read(f))?;
    let trace = crate::trace::swf::SwfTrace::read(input)
        .with_context(|| format!("{}: cannot read", path.display()))?;
    pb.finish_and_clear();
    Ok(trace)
}
