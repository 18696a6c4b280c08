//! Slurm's REST API: the model and client on responses captured from real slurmrestd
//! daemons (`fixtures`), and the client against the live local Slurm that
//! `scripts/local-slurm` runs (`live`). Both check what they read against Slurm's own
//! `scontrol show job` (`scontrol`).

mod fixtures;
mod live;
pub(crate) mod scontrol;
