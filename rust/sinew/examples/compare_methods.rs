//! Every method on the tech report's 10-joint chain (§4.2: 10 × 900 mm, tolerance 1e-3 mm),
//! from the straight start, with a 2000-iteration cap (issue #14's bound): how many targets
//! each reaches, in how many iterations, and the time per solve and per iteration.
//!
//! ```text
//! cargo run --release -p sinew --example compare_methods
//! ```
//!
//! The target sets are the benchmark's (`benches/fabrik.rs`): 1000 seeded targets uniform in the
//! reachable ball, 1000 beyond reach, and, for the chain with cone and twist limits on every
//! joint, 1000 targets that are FK of random in-limit poses. Times are wall-clock on this machine,
//! each set solved once (no warm-up, no repetition): indicative, not a benchmark.

#[path = "../tests/common/mod.rs"]
mod common;

use std::time::Instant;

use common::{Rng, load, mean, median};
use glam::DVec3;
use sinew::{Error, LoadedProblem, Method, Pose, SolveSettings};

const CASES: usize = 1000;
const CAP: u32 = 2000;

fn main() {
    let chain = load("paper_chain10.json");
    let limited = load("paper_chain10_constrained.json");
    let base = chain.problem.rig().rest_frames().heads[0];
    let reach = 9000.0;
    let mut rng = Rng::new(2009);
    let reachable: Vec<DVec3> = (0..CASES).map(|_| base + rng.in_ball(reach * 0.999)).collect();
    let mut rng = Rng::new(4);
    let unreachable: Vec<DVec3> = (0..CASES).map(|_| base + rng.unit() * rng.range(reach + 0.5, 20000.0)).collect();
    let rig = limited.problem.rig();
    let mut rng = Rng::new(42);
    let in_limits: Vec<DVec3> = (0..CASES)
        .map(|_| {
            let truth = Pose { rotations: rig.bones().iter().map(|b| b.limit.clamp(rng.rotation(1.2))).collect(), root_translation: DVec3::ZERO };
            rig.forward(&truth).tails[limited.problem.goals()[0].bone]
        })
        .collect();
    println!("10-joint chain, {CASES} targets per set, cap {CAP} iterations, tolerance 1e-3 mm, from the straight start");
    println!("{:<34} {:>15} {:>8} {:>8} {:>8} {:>10} {:>10}", "set / method", "reached", "mean it", "med it", "max it", "µs/solve", "µs/iter");
    for (set, lp, targets) in [
        ("chain10 reachable", &chain, &reachable),
        ("chain10 unreachable", &chain, &unreachable),
        ("chain10_constrained reachable", &limited, &reachable),
        ("chain10_constrained in-limit", &limited, &in_limits),
    ] {
        for method in Method::ALL {
            run(set, lp, targets, method);
        }
    }
}

fn run(set: &str, lp: &LoadedProblem, targets: &[DVec3], method: Method) {
    let settings = SolveSettings { max_iterations: CAP, ..lp.settings };
    let mut solver = method.solver(settings).unwrap();
    let mut problem = lp.problem.clone();
    let (mut iterations, mut reached, mut total_iterations) = (Vec::new(), 0usize, 0u64);
    let t = Instant::now();
    for &target in targets {
        problem.set_target(0, target).unwrap();
        match solver.solve(&problem, &lp.pose) {
            Ok(sol) => {
                total_iterations += u64::from(sol.iterations);
                if sol.reached {
                    reached += 1;
                    iterations.push(f64::from(sol.iterations));
                }
            }
            Err(Error::Unsupported { what, .. }) => {
                println!("{:<34} unsupported: {what}", format!("{set} / {}", method.name()));
                return;
            }
            Err(e) => panic!("{}: {e}", method.name()),
        }
    }
    let elapsed = t.elapsed().as_secs_f64() * 1e6;
    let max = iterations.iter().copied().fold(0.0, f64::max);
    let mean_it = if iterations.is_empty() { f64::NAN } else { mean(&iterations) };
    println!(
        "{:<34} {:>6}/{} {:>5.1}% {:>8.1} {:>8.1} {:>8} {:>10.1} {:>10.2}",
        format!("{set} / {}", method.name()),
        reached,
        targets.len(),
        100.0 * reached as f64 / targets.len() as f64,
        mean_it,
        median(&mut iterations),
        max,
        elapsed / targets.len() as f64,
        elapsed / total_iterations.max(1) as f64,
    );
}
