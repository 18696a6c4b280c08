//! The one integration test binary of qbets; each module tests one part of the system
//! through its public interface, against real services where the part has one.

mod slurm;
