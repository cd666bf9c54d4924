//! Studio-sized rigs: solve time and peak memory against bones and goals (issue: hardening,
//! "Scale"). Prints a markdown table for `docs/benchmarks.md`.
//!
//! `cargo bench -p sinew --bench scale`
//!
//! Each rig is a trunk with limbs hanging off it and a goal per limb tip
//! (`tests/common/limbs.rs`): goals whose chains stay in their limbs are independent (their
//! damped-least-squares systems are separate blocks); goals whose chains run up the trunk to the
//! root all meet, and share one dense system.

use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Instant;

use sinew::{Method, RootMode, SolveSettings};

#[path = "../tests/common/limbs.rs"]
mod limbs;

/// The system allocator, counting the bytes live and their peak.
struct Counting;

static LIVE: AtomicUsize = AtomicUsize::new(0);
static PEAK: AtomicUsize = AtomicUsize::new(0);

unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        let p = unsafe { System.alloc(layout) };
        if !p.is_null() {
            let live = LIVE.fetch_add(layout.size(), Ordering::Relaxed) + layout.size();
            PEAK.fetch_max(live, Ordering::Relaxed);
        }
        p
    }
    unsafe fn dealloc(&self, p: *mut u8, layout: Layout) {
        unsafe { System.dealloc(p, layout) };
        LIVE.fetch_sub(layout.size(), Ordering::Relaxed);
    }
}

#[global_allocator]
static ALLOCATOR: Counting = Counting;

fn mib(bytes: usize) -> f64 {
    bytes as f64 / (1024.0 * 1024.0)
}

fn main() {
    // (trunk bones, limbs, bones per limb, chain length: 0 runs up to the root)
    let rigs = [(100, 1000, 10, 10), (1000, 10_000, 10, 10), (1, 65_536, 1, 1), (20, 200, 10, 0), (20, 256, 10, 0), (100, 1000, 10, 0)];
    println!("| bones | goals | chains | method | set-up (s) | solve (s) | iterations | reached | peak memory (MiB) |");
    println!("|---|---|---|---|---|---|---|---|---|");
    for (trunk, count, len, chain) in rigs {
        let bones = trunk + count * len;
        let chains = match chain {
            0 => "to the root (all meet)".to_owned(),
            1 => "1 bone (independent)".to_owned(),
            _ => format!("{chain} bones (independent)"),
        };
        let t = Instant::now();
        let base = LIVE.load(Ordering::Relaxed);
        PEAK.store(base, Ordering::Relaxed);
        let (problem, start) = match limbs::limbs(trunk, count, len, chain, RootMode::Pinned) {
            Ok(p) => p,
            Err(e) => {
                println!("| {bones} | {count} | {chains} | | refused: {e} | | | | |");
                continue;
            }
        };
        let setup = t.elapsed().as_secs_f64();
        for method in [Method::Fabrik, Method::Dls] {
            let before = LIVE.load(Ordering::Relaxed);
            PEAK.store(before, Ordering::Relaxed);
            let mut solver = method.solver(SolveSettings::default()).expect("default settings");
            let t = Instant::now();
            let s = solver.solve(&problem, &start).expect("a valid problem");
            let secs = t.elapsed().as_secs_f64();
            let peak = PEAK.load(Ordering::Relaxed) - base;
            println!(
                "| {bones} | {count} | {chains} | {} | {setup:.3} | {secs:.3} | {} | {} | {:.1} |",
                method.name(),
                s.iterations,
                if s.reached { "yes" } else { "no" },
                mib(peak)
            );
        }
    }
}
