//! Fuzz targets for cargo-fuzz; the same functions run on stable through
//! `crates/grammask-core/tests/fuzz.rs`.
pub mod targets;
