//! Warm-started tracking allocates nothing but its result (the README's claim): once the solver
//! has sized its scratch space (each path the first time it runs), a solve allocates the returned
//! `Solution`'s two vectors (rotations and residuals) and nothing else, whichever path it takes
//! (FABRIK, the serial chain with limits that do not bind, the damped-least-squares tracking
//! step, the finish, the transpose's steps, `nlp`'s quasi-Newton memory once it has filled).

mod common;

use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicUsize, Ordering};

use common::load;
use sinew::{Method, Pose, Reference};

struct Counting;

static ALLOCATIONS: AtomicUsize = AtomicUsize::new(0);

// SAFETY: forwards to the system allocator; only counts.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        ALLOCATIONS.fetch_add(1, Ordering::Relaxed);
        // SAFETY: the caller's contract is passed on unchanged.
        unsafe { System.alloc(layout) }
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: as above.
        unsafe { System.dealloc(ptr, layout) }
    }
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        ALLOCATIONS.fetch_add(1, Ordering::Relaxed);
        // SAFETY: as above.
        unsafe { System.realloc(ptr, layout, new_size) }
    }
}

#[global_allocator]
static GLOBAL: Counting = Counting;

#[test]
fn warm_started_tracking_allocates_only_the_solution() {
    // (With the rest pose as the reference, the steps that pull toward it: their active set
    // and the restart of a run where limits hold bones.)
    for (file, method, toward_rest) in [
        ("paper_humanoid13.json", Method::Fabrik, false),
        ("paper_humanoid13_constrained.json", Method::Fabrik, false),
        ("paper_humanoid13_constrained.json", Method::Dls, false),
        ("paper_chain10_constrained.json", Method::Fabrik, false),
        ("paper_humanoid13_constrained.json", Method::FabrikClassic, false),
        ("paper_humanoid13_constrained.json", Method::Ccd, false),
        ("paper_chain10_constrained.json", Method::Triangulation, false),
        ("paper_humanoid13_constrained.json", Method::JacobianTranspose, false),
        ("paper_humanoid13_constrained.json", Method::Nlp, false),
        ("paper_humanoid13_constrained.json", Method::Fabrik, true),
        ("paper_humanoid13_constrained.json", Method::Dls, true),
    ] {
        let lp = load(file);
        let tracks = common::humanoid_tracks(120, 60.0, 7);
        let mut problems = Vec::new();
        for targets in &tracks {
            let mut p = lp.problem.clone();
            for gi in 0..p.goals().len() {
                p.set_target(gi, targets[gi % targets.len()]).unwrap();
            }
            if toward_rest {
                p.set_reference(Reference::Pose(Pose::rest(p.rig().len()))).unwrap();
            }
            problems.push(p);
        }
        let mut solver = method.solver(lp.settings).unwrap();
        let mut worst = 0;
        // The first pass sizes the scratch space of every path the track takes (a path sizes
        // its own the first time it runs); the second is counted.
        for pass in 0..2 {
            let mut pose = solver.solve(&problems[0], &lp.pose).unwrap().pose;
            for p in &problems[1..] {
                let before = ALLOCATIONS.load(Ordering::Relaxed);
                let sol = solver.solve(p, &pose).unwrap();
                if pass == 1 {
                    worst = worst.max(ALLOCATIONS.load(Ordering::Relaxed) - before);
                }
                pose = sol.pose;
            }
        }
        // The solution: its pose's rotations, its residuals and its orientation residuals.
        assert!(worst <= 3, "{file} with {} (toward the rest pose: {toward_rest}): a solve made {worst} allocations", method.name());
    }
}
