//! How a kernel was obtained, for the kernel examples (`kernel_costs`, `tail_fills`), shared through `#[path]`.
use grammask_core::compiled::KernelStats;

/// How the kernel just classified was obtained: the first [`KernelStats`] count that grew (an
/// inner kernel's where classifications nest).
pub fn path(before: &KernelStats, after: &KernelStats) -> &'static str {
    let (b, a) = (before, after);
    let grew = [
        (a.siblings > b.siblings, "sibling"),
        (a.excluded > b.excluded, "excluded"),
        (a.composed > b.composed, "composed"),
        (a.shifted > b.shifted, "shifted"),
        (a.shared > b.shared, "shared"),
        (a.quote_cuts > b.quote_cuts, "quote cut"),
        (a.walked > b.walked, "walked"),
    ];
    grew.iter().find(|g| g.0).map_or("cached", |g| g.1)
}
