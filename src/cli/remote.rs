//! What the users' subcommands (`qbets bound|deadline|job|rank|advise|reserve`) share: the
//! server they ask (`--server`/`QBETS_URL`, `QBETS_TOKEN`), `--json`, the exit codes
//! scripts test, the durations and times they accept, and plain-text tables.

use std::process::ExitCode;
use std::time::Duration;

use crate::client::{Client, ClientError, DEFAULT_SERVER};

/// Exit codes of the users' subcommands (also in `qbets --help`).
pub mod exit {
    /// The question was answered (for `reserve watch`: the reservation succeeded).
    pub const OK: u8 = 0;
    /// Anything else went wrong: the server failed (5xx) or answered something
    /// unreadable, or output could not be written.
    pub const FAILURE: u8 = 1;
    /// The command line was wrong (clap's own code).
    pub const USAGE: u8 = 2;
    /// The server could not be reached, or did not answer in time.
    pub const UNREACHABLE: u8 = 3;
    /// The server refused the request: a value it does not accept (400/422), a site,
    /// queue, job or reservation it does not know (404), a conflict (409).
    pub const REFUSED: u8 = 4;
    /// No token, or a token without the scope needed (401/403).
    pub const UNAUTHORIZED: u8 = 5;
    /// Answered without a number: too little history, or the queue may be down; for a
    /// plan, no submission time meets the probability asked for; for `advise`, no
    /// candidate shape has a number.
    pub const NO_ANSWER: u8 = 6;
    /// `reserve watch`: the reservation ended other than succeeded (failed, cancelled,
    /// refused, error).
    pub const NOT_MET: u8 = 7;
}

/// The text `qbets --help` shows about exit codes and the server settings.
pub const EXIT_CODES_HELP: &str = "\
Asking a server (bound, deadline, job, rank, advise, reserve):
  --server URL or QBETS_URL (default http://127.0.0.1:8080); QBETS_TOKEN: a token
  from `qbets token create` (needed for reservations, and where reads need one).

Exit codes of those commands:
  0  answered (reserve watch: the reservation succeeded)
  1  the server failed or answered something unreadable
  2  the command line is wrong
  3  the server cannot be reached or did not answer in time
  4  the server refused the request (a bad value, an unknown site, queue, job or
     reservation)
  5  no token, or the token lacks the scope needed
  6  answered without a number (too little history, queue may be down), or no plan
     meets the probability; advise: no candidate shape has a number
  7  reserve watch: the reservation failed, was cancelled, refused or hit an error";

/// Where the server is and how to answer.
#[derive(Debug, Clone, clap::Args)]
pub struct ServerArgs {
    /// The qbets server's URL. Also QBETS_URL.
    #[arg(long, value_name = "URL", env = "QBETS_URL", default_value = DEFAULT_SERVER,
          hide_env_values = true)]
    pub server: String,
    /// Seconds to wait for each answer.
    #[arg(long, value_name = "S", default_value_t = 30.0, value_parser = timeout_s)]
    pub timeout: f64,
    /// Print the server's answer as JSON (for scripts) instead of a table.
    #[arg(long)]
    pub json: bool,
}

impl ServerArgs {
    /// A client of the server, with `QBETS_TOKEN` when set.
    pub fn client(&self) -> Result<Client, ClientError> {
        // Read here, not by clap, so that the secret never shows in `--help`.
        let token = std::env::var("QBETS_TOKEN").ok();
        Client::new(&self.server, token, Duration::from_secs_f64(self.timeout))
    }
}

/// `--timeout`: above 0, at most an hour.
fn timeout_s(s: &str) -> Result<f64, String> {
    super::number_where(s, |v| v > 0.0 && v <= 3600.0, "above 0 and at most 3600")
}

/// A command's failure with the exit code it ends with.
#[derive(Debug)]
pub struct Failure {
    /// The exit code.
    pub code: u8,
    /// What to say on stderr.
    pub message: String,
}

impl Failure {
    /// A failure with `code`.
    pub fn new(code: u8, message: impl Into<String>) -> Self {
        Failure {
            code,
            message: message.into(),
        }
    }
}

impl From<ClientError> for Failure {
    fn from(e: ClientError) -> Self {
        let code = match &e {
            ClientError::Config(_) => exit::USAGE,
            ClientError::Unreachable { .. } => exit::UNREACHABLE,
            ClientError::Protocol { .. } => exit::FAILURE,
            ClientError::Refused { status, problem } => match status {
                401 | 403 => exit::UNAUTHORIZED,
                422 if problem["type"] == "urn:qbets:problem:no-plan" => exit::NO_ANSWER,
                400..=499 => exit::REFUSED,
                _ => exit::FAILURE,
            },
        };
        let mut message = e.to_string();
        if code == exit::UNAUTHORIZED && std::env::var_os("QBETS_TOKEN").is_none() {
            message.push_str(" (set QBETS_TOKEN to a token made by `qbets token create`)");
        }
        Failure { code, message }
    }
}

impl From<std::io::Error> for Failure {
    fn from(e: std::io::Error) -> Self {
        Failure::new(exit::FAILURE, format!("cannot write the answer: {e}"))
    }
}

/// Runs a users' command on a small runtime and turns its result into the exit code.
pub fn run_command(
    work: impl std::future::Future<Output = Result<u8, Failure>>,
) -> anyhow::Result<ExitCode> {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    Ok(match rt.block_on(work) {
        Ok(code) => ExitCode::from(code),
        Err(f) => {
            eprintln!("qbets: {}", f.message);
            ExitCode::from(f.code)
        }
    })
}

/// Prints `value` as pretty JSON on stdout.
pub fn print_json(value: &impl serde::Serialize) -> Result<(), Failure> {
    let text = serde_json::to_string_pretty(value)
        .map_err(|e| Failure::new(exit::FAILURE, format!("cannot print JSON: {e}")))?;
    println!("{text}");
    Ok(())
}

/// A duration given on the command line: seconds (`90`), Slurm's `[D-]HH:MM:SS` forms
/// (`01:30:00`, `2-00`), or units (`90m`, `1h30m`, `2d`, `45s`); a leading `+` is
/// allowed. In seconds, at least 1.
pub fn duration(text: &str) -> Result<i64, String> {
    let t = text.trim();
    let t = t.strip_prefix('+').unwrap_or(t).trim();
    if t.contains(':') || t.contains('-') || t.bytes().all(|b| b.is_ascii_digit()) {
        return crate::http::params::walltime(t);
    }
    let bad = || {
        format!(
            "expected seconds, [D-]HH:MM:SS or a duration such as 90m, 1h30m or 2d, got {text:?}"
        )
    };
    let mut total: i64 = 0;
    let mut number = String::new();
    let mut last_unit = usize::MAX;
    for c in t.chars() {
        if c.is_ascii_digit() {
            number.push(c);
            continue;
        }
        let (rank, unit) = match c {
            'd' => (0, 86_400),
            'h' => (1, 3_600),
            'm' => (2, 60),
            's' => (3, 1),
            _ => return Err(bad()),
        };
        // Units in order, each once: 1h30m, not 30m1h or 1h1h.
        if number.is_empty() || number.len() > 9 || (last_unit != usize::MAX && rank <= last_unit) {
            return Err(bad());
        }
        last_unit = rank;
        total = total
            .checked_add(number.parse::<i64>().map_err(|_| bad())? * unit)
            .ok_or_else(bad)?;
        number.clear();
    }
    if !number.is_empty() || total < 1 {
        return Err(bad());
    }
    // The same ceiling the server's walltimes have.
    crate::http::params::walltime(&total.to_string())
}

/// A time given on the command line: an RFC 3339 time, or a duration from now (`+2h`,
/// `90m`, `01:00:00`), "now" being the site's present (a demo's runs fast).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum When {
    /// Unix seconds.
    At(i64),
    /// Seconds after the site's present.
    In(i64),
}

/// Reads a [`When`].
pub fn when(text: &str) -> Result<When, String> {
    if crate::http::params::looks_like_a_time(text) {
        return crate::http::params::timestamp(text).map(When::At);
    }
    duration(text).map(When::In).map_err(|_| {
        format!(
            "expected an RFC 3339 time (2024-05-01T12:00:00Z) or a duration from now \
             (+2h, 90m, 01:30:00), got {text:?}"
        )
    })
}

/// A node count: a whole number from 1 to 100000000.
pub fn nodes(text: &str) -> Result<i64, String> {
    crate::http::params::positive(text, crate::http::params::MAX_NODES)
}

/// A probability strictly between 0 and 1.
pub fn probability(text: &str) -> Result<f64, String> {
    crate::http::params::probability(text)
}

/// A duration for people: `45 s`, `41 min`, `2 h 05 min`, `3 d 4 h` — rounded up, so
/// that "within 41 min" never promises less than the bound.
pub fn human(seconds: u64) -> String {
    if seconds < 60 {
        return format!("{seconds} s");
    }
    let minutes = seconds.div_ceil(60);
    if minutes < 60 {
        return format!("{minutes} min");
    }
    if minutes < 24 * 60 {
        return format!("{} h {:02} min", minutes / 60, minutes % 60);
    }
    let hours = seconds.div_ceil(3_600);
    match (hours / 24, hours % 24) {
        (d, 0) => format!("{d} d"),
        (d, h) => format!("{d} d {h} h"),
    }
}

/// A percentage without needless decimals: 95%, 99.5%.
pub fn percent(p: f64) -> String {
    let v = (p * 1000.0).round() / 10.0;
    if v.fract() == 0.0 {
        format!("{v:.0}%")
    } else {
        format!("{v:.1}%")
    }
}

/// A plain-text table: a header row and aligned columns, two spaces apart.
pub struct Table {
    header: Vec<String>,
    rows: Vec<Vec<String>>,
}

impl Table {
    /// A table with these column names.
    pub fn new(header: &[&str]) -> Self {
        Table {
            header: header.iter().map(|h| h.to_string()).collect(),
            rows: Vec::new(),
        }
    }

    /// Adds a row (as many cells as columns).
    pub fn row(&mut self, cells: Vec<String>) {
        self.rows.push(cells);
    }

    /// The table as text, each line ending in a newline.
    pub fn render(&self) -> String {
        let cols = self.header.len();
        let mut widths: Vec<usize> = self.header.iter().map(|h| h.chars().count()).collect();
        for r in &self.rows {
            for (i, c) in r.iter().enumerate().take(cols) {
                widths[i] = widths[i].max(c.chars().count());
            }
        }
        let mut out = String::new();
        for line in std::iter::once(&self.header).chain(&self.rows) {
            let mut text = String::new();
            for (i, c) in line.iter().enumerate().take(cols) {
                if i + 1 == cols {
                    text.push_str(c);
                } else {
                    text.push_str(&format!("{c:<w$}  ", w = widths[i]));
                }
            }
            out.push_str(text.trim_end());
            out.push('\n');
        }
        out
    }

    /// Prints the table on stdout.
    pub fn print(&self) {
        print!("{}", self.render());
    }
}

/// An optional value for a table cell ("—" when absent).
pub fn or_dash<T: std::fmt::Display>(v: Option<T>) -> String {
    v.map_or_else(|| "—".to_string(), |v| v.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations_in_every_form() {
        assert_eq!(duration("90"), Ok(90));
        assert_eq!(duration("01:30:00"), Ok(5_400));
        assert_eq!(duration("2-00"), Ok(172_800));
        assert_eq!(duration("90m"), Ok(5_400));
        assert_eq!(duration("+1h30m"), Ok(5_400));
        assert_eq!(duration("2d"), Ok(172_800));
        assert_eq!(duration("45s"), Ok(45));
        for bad in [
            "", "0", "h", "30m1h", "1h1h", "1.5h", "1 h", "-5", "1x", "0m",
        ] {
            assert!(duration(bad).is_err(), "{bad:?} was taken");
        }
    }

    #[test]
    fn times_absolute_or_relative() {
        assert_eq!(when("2024-05-01T12:00:00Z"), Ok(When::At(1_714_564_800)));
        assert_eq!(when("+2h"), Ok(When::In(7_200)));
        assert_eq!(when("04:00:00"), Ok(When::In(14_400)));
        let e = when("tomorrow").unwrap_err();
        assert!(e.contains("RFC 3339") && e.contains("\"tomorrow\""), "{e}");
    }

    #[test]
    fn durations_for_people_never_round_down() {
        assert_eq!(human(45), "45 s");
        assert_eq!(human(60), "1 min");
        assert_eq!(human(2_461), "42 min");
        assert_eq!(human(3_599), "1 h 00 min");
        assert_eq!(human(7_500), "2 h 05 min");
        assert_eq!(human(3 * 86_400 + 4 * 3_600 + 5), "3 d 5 h");
        assert_eq!(human(2 * 86_400), "2 d");
        assert_eq!(percent(0.95), "95%");
        assert_eq!(percent(0.995), "99.5%");
    }

    #[test]
    fn tables_align_their_columns() {
        let mut t = Table::new(&["SITE", "QUEUE", "BOUND"]);
        t.row(vec!["demo".into(), "normal".into(), "41 min".into()]);
        t.row(vec!["a-long-site".into(), "x".into(), "—".into()]);
        assert_eq!(
            t.render(),
            "SITE         QUEUE   BOUND\n\
             demo         normal  41 min\n\
             a-long-site  x       —\n"
        );
    }
}
