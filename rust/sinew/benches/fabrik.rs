//! FABRIK on the tech report's models (§4.2, §4.3): per-solve time with criterion, and the
//! figures criterion does not give (iterations, reach, jitter, reconstruction error) computed in
//! the set-up, printed to stderr and written to `target/sinew-bench-stats.txt`.
//!
//! ```text
//! cargo bench -p sinew --bench fabrik
//! ```
//!
//! - `chain10/reachable`: the 10-joint chain (10 × 900 mm = 9000 mm, tolerance 1e-3 mm), 1000
//!   seeded targets uniform in the reachable ball, each solved from the straight start.
//! - `chain10/unreachable`: 1000 seeded targets 9000.5–20000 mm from the root.
//! - `chain10_constrained/...`: the same chain with cone + twist limits on every joint, on the
//!   same 1000 reachable targets and on 1000 targets that are FK of random in-limit poses.
//! - `textbook_alg1/reachable`: Alg. 1 exactly as printed (positions only, no rotations), on the
//!   same targets, as a reference for iteration counts and cost.
//! - `humanoid13/tracking`, `humanoid13_constrained/tracking`: 4 effectors following the
//!   effectors of a smooth motion (sums of sinusoids per joint, inside the constrained humanoid's
//!   limits, so always reachable), 1000 frames at 60 fps, each frame warm-started from the
//!   previous solution.
//! - `chain10/tracking`, `chain10_constrained/tracking` (stats only): the chain's tip following a
//!   smooth motion inside the constrained chain's limits, 1000 frames at 60 fps, warm-started.
//!
//! - `dls: ...`, `dls_*`: the same sets solved by damped least squares alone (`Method::Dls`), the
//!   Jacobian peer with the same limits, in the same run; and the §4.3.2 reconstruction with it.
//!
//! Each criterion iteration is one solve; iterations cycle through the 1000 cases, so criterion's
//! figure is the mean time per solve over the set. The median per solve is measured separately
//! (each case timed alone, best of 5) and written with the stats.

#[path = "../tests/common/mod.rs"]
mod common;

use std::fmt::Write as _;
use std::hint::black_box;
use std::time::{Duration, Instant};

use common::{Rng, jitter, load, mean, median, reconstruct, synth_motion, without_limits};
use criterion::{Criterion, criterion_group};
use glam::DVec3;
use sinew::{LoadedProblem, Method, Pose, Problem, Reference, Solution, SolveSettings};

const CASES: usize = 1000;
const FRAMES: usize = 1000;

fn reachable_targets(base: DVec3, reach: f64) -> Vec<DVec3> {
    let mut rng = Rng::new(2009);
    (0..CASES).map(|_| base + rng.in_ball(reach * 0.999)).collect()
}

fn unreachable_targets(base: DVec3, reach: f64) -> Vec<DVec3> {
    let mut rng = Rng::new(4);
    (0..CASES).map(|_| base + rng.unit() * rng.range(reach + 0.5, 20000.0)).collect()
}

fn in_limit_targets(lp: &LoadedProblem) -> Vec<DVec3> {
    let rig = lp.problem.rig();
    let effector = lp.problem.goals()[0].bone;
    let mut rng = Rng::new(42);
    (0..CASES)
        .map(|_| {
            let truth = Pose {
                rotations: rig.bones().iter().map(|b| b.limit.clamp(rng.rotation(1.2))).collect(),
                root_translation: DVec3::ZERO,
                scales: Vec::new(),
            };
            rig.forward(&truth).tails[effector]
        })
        .collect()
}

/// Alg. 1 of the report, verbatim: joint positions only, unreachable shortcut, forward and
/// backward reaching until the end effector is within `tol` (or `max` iterations).
fn textbook_alg1(p: &mut [DVec3], d: &[f64], t: DVec3, tol: f64, max: u32) -> u32 {
    let n = p.len();
    let dist = (p[0] - t).length();
    if dist > d.iter().sum::<f64>() {
        for i in 0..n - 1 {
            let r = (t - p[i]).length();
            let l = d[i] / r;
            p[i + 1] = (1.0 - l) * p[i] + l * t;
        }
        return 1;
    }
    let b = p[0];
    let mut it = 0;
    while (p[n - 1] - t).length() > tol && it < max {
        it += 1;
        p[n - 1] = t;
        for i in (0..n - 1).rev() {
            let r = (p[i + 1] - p[i]).length();
            let l = d[i] / r;
            p[i] = (1.0 - l) * p[i + 1] + l * p[i];
        }
        p[0] = b;
        for i in 0..n - 1 {
            let r = (p[i + 1] - p[i]).length();
            let l = d[i] / r;
            p[i + 1] = (1.0 - l) * p[i] + l * p[i + 1];
        }
    }
    it
}

/// One single-goal problem per target.
fn problems(lp: &LoadedProblem, targets: &[DVec3]) -> Vec<Problem> {
    targets
        .iter()
        .map(|t| {
            let mut p = lp.problem.clone();
            p.set_target(0, *t).unwrap();
            p
        })
        .collect()
}

/// Median over cases of the best of 5 timings of one solve (nanoseconds).
fn median_solve_ns(method: Method, settings: SolveSettings, cases: &[(Problem, Pose)]) -> f64 {
    let mut solver = method.solver(settings).unwrap();
    let mut per_case: Vec<f64> = cases
        .iter()
        .map(|(p, start)| {
            (0..5)
                .map(|_| {
                    let t = Instant::now();
                    black_box(solver.solve(black_box(p), black_box(start)).unwrap());
                    t.elapsed().as_nanos() as f64
                })
                .fold(f64::INFINITY, f64::min)
        })
        .collect();
    median(&mut per_case)
}

struct Summary {
    name: String,
    iterations: Vec<f64>,
    reached: usize,
    median_ns: f64,
}

impl Summary {
    fn line(&self) -> String {
        let mut it = self.iterations.clone();
        format!(
            "{:<36} median {:>8.0} ns/solve | iterations mean {:>6.2} median {:>5} max {:>4} | reached {}/{}",
            self.name,
            self.median_ns,
            mean(&self.iterations),
            median(&mut it),
            self.iterations.iter().copied().fold(0.0, f64::max),
            self.reached,
            self.iterations.len()
        )
    }
}

fn summarize(name: &str, method: Method, settings: SolveSettings, cases: &[(Problem, Pose)]) -> Summary {
    let mut solver = method.solver(settings).unwrap();
    let sols: Vec<Solution> = cases.iter().map(|(p, s)| solver.solve(p, s).unwrap()).collect();
    Summary {
        name: name.into(),
        iterations: sols.iter().map(|s| f64::from(s.iterations)).collect(),
        reached: sols.iter().filter(|s| s.reached).count(),
        median_ns: median_solve_ns(method, settings, cases),
    }
}

/// A tracking run: per frame, the problem (targets set) and the warm start (previous solution).
struct Tracking {
    method: Method,
    settings: SolveSettings,
    frames: Vec<(Problem, Pose)>,
    solutions: Vec<Solution>,
}

/// The humanoid's tracking run (the effectors of a smooth motion, see the module docs).
fn tracking(file: &str, method: Method) -> Tracking {
    tracking_targets(file, method, &common::humanoid_tracks(FRAMES, 60.0, 7))
}

/// The chain's tip following a smooth motion inside the constrained chain's limits (60 fps).
fn chain_tracks() -> Vec<Vec<DVec3>> {
    let rig = load("paper_chain10_constrained.json").problem.rig().clone();
    synth_motion(&rig, 1, FRAMES, 60.0).iter().map(|t| vec![rig.forward(t).tails[9]]).collect()
}

/// A tracking run on `file` with per-frame targets `tracks` (one per goal).
fn tracking_targets(file: &str, method: Method, tracks: &[Vec<DVec3>]) -> Tracking {
    tracking_run(file, method, tracks, false)
}

/// [`tracking_targets`], with the rest pose as every frame's reference when `rest_reference`.
fn tracking_run(file: &str, method: Method, tracks: &[Vec<DVec3>], rest_reference: bool) -> Tracking {
    let lp = load(file);
    let mut solver = method.solver(lp.settings).unwrap();
    let mut pose = lp.pose.clone();
    let mut frames = Vec::with_capacity(FRAMES);
    let mut solutions = Vec::with_capacity(FRAMES);
    for targets in tracks {
        let mut p = lp.problem.clone();
        for (gi, t) in targets.iter().enumerate() {
            p.set_target(gi, *t).unwrap();
        }
        if rest_reference {
            p.set_reference(Reference::Pose(Pose::rest(p.rig().len()))).unwrap();
        }
        let sol = solver.solve(&p, &pose).unwrap();
        frames.push((p, pose));
        pose = sol.pose.clone();
        solutions.push(sol);
    }
    Tracking { method, settings: lp.settings, frames, solutions }
}

fn tracking_lines(name: &str, t: &Tracking) -> String {
    let iterations: Vec<f64> = t.solutions.iter().map(|s| f64::from(s.iterations)).collect();
    // Smoothness from frame 0's solution on (frame 0 catches up from the rest pose).
    let poses: Vec<Pose> = t.solutions.iter().map(|s| s.pose.clone()).collect();
    let max_turn = poses.windows(2).map(|w| w[1].max_angle_to(&w[0])).fold(0.0, f64::max);
    let worst = t.solutions.iter().map(Solution::worst_residual).fold(0.0, f64::max);
    let reached = t.solutions.iter().filter(|s| s.reached).count();
    let mut it = iterations.clone();
    format!(
        "{:<36} median {:>8.0} ns/frame | iterations/frame mean {:>6.2} median {:>5} max {:>4} | reached {}/{} (worst residual {:.3} mm)\n{:<36} jitter {:.5} rad ({:.3}°) mean turn per bone per frame, largest per-frame turn {:.4} rad",
        name,
        median_solve_ns(t.method, t.settings, &t.frames),
        mean(&iterations),
        median(&mut it),
        iterations.iter().copied().fold(0.0, f64::max),
        reached,
        t.solutions.len(),
        worst,
        "",
        jitter(&poses),
        jitter(&poses).to_degrees(),
        max_turn
    )
}

fn bench_single(c: &mut Criterion, group: &str, name: &str, method: Method, settings: SolveSettings, cases: &[(Problem, Pose)]) {
    let mut g = c.benchmark_group(group);
    let mut solver = method.solver(settings).unwrap();
    let mut k = 0usize;
    g.bench_function(name, |b| {
        b.iter(|| {
            let (p, s) = &cases[k % cases.len()];
            k += 1;
            black_box(solver.solve(black_box(p), black_box(s)).unwrap())
        })
    });
    g.finish();
}

fn benches(c: &mut Criterion) {
    let chain = load("paper_chain10.json");
    let limited = load("paper_chain10_constrained.json");
    let base = chain.problem.rig().rest_frames().heads[0];
    let reach: f64 = chain.problem.rig().bones().iter().map(|b| b.length).sum();
    let straight = chain.pose.clone();
    let with_start =
        |ps: Vec<Problem>| -> Vec<(Problem, Pose)> { ps.into_iter().map(|p| (p, straight.clone())).collect() };

    let reachable = reachable_targets(base, reach);
    let unreachable = unreachable_targets(base, reach);
    let in_limits = in_limit_targets(&limited);
    let sets = [
        ("chain10", "reachable", &chain, with_start(problems(&chain, &reachable))),
        ("chain10", "unreachable", &chain, with_start(problems(&chain, &unreachable))),
        ("chain10_constrained", "reachable", &limited, with_start(problems(&limited, &reachable))),
        ("chain10_constrained", "in_limit_targets", &limited, with_start(problems(&limited, &in_limits))),
    ];

    let mut stats = String::new();
    let head = format!(
        "Sinew FABRIK benchmark statistics\ncore: {}\ncases: {CASES} per set, from the straight start; tracking: {FRAMES} frames at 60 fps, warm-started\n",
        option_env!("SINEW_BENCH_REV").unwrap_or("(set SINEW_BENCH_REV to record the commit)")
    );
    stats.push_str(&head);
    for (group, name, lp, cases) in &sets {
        let s = summarize(&format!("{group}/{name}"), Method::Fabrik, lp.settings, cases);
        writeln!(stats, "{}", s.line()).unwrap();
    }
    // The Jacobian peer: damped least squares alone, same sets, same limits, same start.
    for (group, name, lp, cases) in &sets {
        let s = summarize(&format!("dls: {group}/{name}"), Method::Dls, lp.settings, cases);
        writeln!(stats, "{}", s.line()).unwrap();
    }
    // Fixed cost: problems whose targets are already met (0 iterations), from the start pose.
    for file in [
        "paper_chain10.json",
        "paper_chain10_constrained.json",
        "paper_humanoid13.json",
        "paper_humanoid13_constrained.json",
    ] {
        let lp = load(file);
        let rest = lp.problem.rig().forward(&lp.pose);
        let mut p = lp.problem.clone();
        for (gi, g) in lp.problem.goals().iter().enumerate() {
            p.set_target(gi, rest.effector(g.bone, g.use_tail)).unwrap();
        }
        let name = format!("{}/targets_already_met", file.trim_end_matches(".json").trim_start_matches("paper_"));
        let s = summarize(&name, Method::Fabrik, lp.settings, &[(p, lp.pose.clone())]);
        writeln!(stats, "{}", s.line()).unwrap();
    }

    // Textbook Alg. 1 on the same reachable targets (positions only).
    let d: Vec<f64> = chain.problem.rig().bones().iter().map(|b| b.length).collect();
    let straight_joints: Vec<DVec3> =
        std::iter::once(base).chain(chain.problem.rig().rest_frames().tails.iter().copied()).collect();
    let tb = &chain.settings;
    let textbook_iters: Vec<f64> = reachable
        .iter()
        .map(|t| {
            let mut p = straight_joints.clone();
            f64::from(textbook_alg1(&mut p, &d, *t, tb.tolerance, 10_000))
        })
        .collect();
    let mut textbook_times: Vec<f64> = reachable
        .iter()
        .map(|t| {
            (0..5)
                .map(|_| {
                    let mut p = straight_joints.clone();
                    let start = Instant::now();
                    black_box(textbook_alg1(black_box(&mut p), &d, *t, tb.tolerance, 10_000));
                    start.elapsed().as_nanos() as f64
                })
                .fold(f64::INFINITY, f64::min)
        })
        .collect();
    // The same with the file's iteration cap, as Sinew runs (the uncapped mean is dominated by a
    // few targets close to the root).
    let capped: Vec<(u32, bool)> = reachable
        .iter()
        .map(|t| {
            let mut p = straight_joints.clone();
            let it = textbook_alg1(&mut p, &d, *t, tb.tolerance, tb.max_iterations);
            (it, (p[p.len() - 1] - *t).length() <= tb.tolerance)
        })
        .collect();
    let capped_iters: Vec<f64> = capped.iter().map(|&(i, _)| f64::from(i)).collect();
    let mut ci = capped_iters.clone();
    writeln!(
        stats,
        "{:<36} iterations mean {:>6.2} median {:>5} with the cap of {} | reached {}/{}",
        "textbook_alg1/reachable (capped)",
        mean(&capped_iters),
        median(&mut ci),
        tb.max_iterations,
        capped.iter().filter(|&&(_, r)| r).count(),
        capped.len()
    )
    .unwrap();
    let mut ti = textbook_iters.clone();
    writeln!(
        stats,
        "{:<36} median {:>8.0} ns/solve | iterations mean {:>6.2} median {:>5} max {:>4} | (no cap, positions only)",
        "textbook_alg1/reachable",
        median(&mut textbook_times),
        mean(&textbook_iters),
        median(&mut ti),
        textbook_iters.iter().copied().fold(0.0, f64::max)
    )
    .unwrap();

    let humanoid = tracking("paper_humanoid13.json", Method::Fabrik);
    let humanoid_limited = tracking("paper_humanoid13_constrained.json", Method::Fabrik);
    let dls_humanoid = tracking("paper_humanoid13.json", Method::Dls);
    let dls_humanoid_limited = tracking("paper_humanoid13_constrained.json", Method::Dls);
    let truth = synth_motion(load("paper_humanoid13_constrained.json").problem.rig(), 7, FRAMES, 60.0);
    let truth_turn = truth.windows(2).map(|w| w[1].max_angle_to(&w[0])).fold(0.0, f64::max);
    writeln!(
        stats,
        "{:<36} jitter {:.5} rad ({:.3}°) mean turn per bone per frame, largest per-frame turn {:.4} rad",
        "tracking ground truth (the motion)",
        jitter(&truth),
        jitter(&truth).to_degrees(),
        truth_turn
    )
    .unwrap();
    writeln!(stats, "{}", tracking_lines("humanoid13/tracking", &humanoid)).unwrap();
    writeln!(stats, "{}", tracking_lines("humanoid13_constrained/tracking", &humanoid_limited)).unwrap();
    writeln!(stats, "{}", tracking_lines("dls: humanoid13/tracking", &dls_humanoid)).unwrap();
    writeln!(stats, "{}", tracking_lines("dls: humanoid13_constrained/tracking", &dls_humanoid_limited)).unwrap();
    // The chain's tip on a smooth motion inside its limits: the single chain's tracking moves.
    let chain_truth = synth_motion(load("paper_chain10_constrained.json").problem.rig(), 1, FRAMES, 60.0);
    writeln!(
        stats,
        "{:<36} jitter {:.5} rad ({:.3}°) mean turn per bone per frame, largest per-frame turn {:.4} rad",
        "chain tracking ground truth",
        jitter(&chain_truth),
        jitter(&chain_truth).to_degrees(),
        chain_truth.windows(2).map(|w| w[1].max_angle_to(&w[0])).fold(0.0, f64::max)
    )
    .unwrap();
    let tracks = chain_tracks();
    for file in ["paper_chain10.json", "paper_chain10_constrained.json"] {
        let name = format!("{}/tracking", file.trim_start_matches("paper_").trim_end_matches(".json"));
        writeln!(stats, "{}", tracking_lines(&name, &tracking_targets(file, Method::Fabrik, &tracks))).unwrap();
    }

    // What the reference pose costs: the same tracking runs with the rest pose as every frame's
    // reference (warm-started as above), and how far each warm answer lies from the cold solve
    // of the same frame from the reference (every 20th frame).
    writeln!(stats, "tracking with the rest pose as the reference (docs/benchmarks.md section 3):").unwrap();
    let humanoid_tracks = common::humanoid_tracks(FRAMES, 60.0, 7);
    for (file, tracks) in [
        ("paper_humanoid13.json", &humanoid_tracks),
        ("paper_humanoid13_constrained.json", &humanoid_tracks),
        ("paper_chain10.json", &tracks),
        ("paper_chain10_constrained.json", &tracks),
    ] {
        for method in [Method::Fabrik, Method::Dls] {
            let run = tracking_run(file, method, tracks, true);
            let mut cold = method.solver(run.settings).unwrap();
            let warm_vs_cold = run
                .frames
                .iter()
                .zip(&run.solutions)
                .step_by(20)
                .map(|((p, _), warm)| {
                    let c = cold.solve(p, p.reference().pose().unwrap()).unwrap();
                    warm.pose.max_angle_to(&c.pose)
                })
                .fold(0.0, f64::max);
            let name = format!("{}: {}/tracking, reference = rest", method.name(), file.trim_start_matches("paper_").trim_end_matches(".json"));
            writeln!(stats, "{}\n{:<36} warm answers within {warm_vs_cold:.2e} rad of the cold solves (every 20th frame)", tracking_lines(&name, &run), "").unwrap();
        }
    }

    // §4.3.2 reconstruction: motion inside the constrained humanoid's limits, targets from FK of
    // the true pose at the four effectors, solved with and without the limits.
    let lp = load("paper_humanoid13_constrained.json");
    let constrained = lp.problem.clone();
    let mut free =
        Problem::new(without_limits(constrained.rig()), constrained.goals().to_vec(), constrained.root()).unwrap();
    free.set_reference(constrained.reference().clone()).unwrap();
    writeln!(stats, "reconstruction (§4.3.2), {FRAMES} frames at 30 fps per seed, mean joint-position error over all 18 joint points:").unwrap();
    let (mut ec, mut eu) = (Vec::new(), Vec::new());
    for seed in 1..=3 {
        let truth = synth_motion(constrained.rig(), seed, FRAMES, 30.0);
        let t0 = Instant::now();
        let rc = reconstruct(&constrained, &truth, lp.settings);
        let tc = t0.elapsed();
        let t0 = Instant::now();
        let ru = reconstruct(&free, &truth, lp.settings);
        let tu = t0.elapsed();
        ec.push(rc.mean_joint_error);
        eu.push(ru.mean_joint_error);
        writeln!(
            stats,
            "  seed {seed}: constrained {:>7.2} mm ({:>4}/{} frames reached, {:>6.1} it/frame, {:>6.1} µs/frame) | unconstrained {:>7.2} mm ({:>4}/{}, {:>6.1} it/frame, {:>6.1} µs/frame)",
            rc.mean_joint_error,
            rc.frames_reached,
            rc.frames,
            rc.mean_iterations,
            tc.as_secs_f64() * 1e6 / FRAMES as f64,
            ru.mean_joint_error,
            ru.frames_reached,
            ru.frames,
            ru.mean_iterations,
            tu.as_secs_f64() * 1e6 / FRAMES as f64
        )
        .unwrap();
    }
    writeln!(stats, "  mean: constrained {:.2} mm, unconstrained {:.2} mm", mean(&ec), mean(&eu)).unwrap();
    // The same with the rest pose as the reference (the pose nearest it among those that meet
    // the goals, `Problem::set_reference`), both methods.
    let mut with_rest = constrained.clone();
    with_rest.set_reference(Reference::Pose(Pose::rest(with_rest.rig().len()))).unwrap();
    for method in [Method::Fabrik, Method::Dls] {
        let mut er = Vec::new();
        for seed in 1..=3 {
            let truth = synth_motion(constrained.rig(), seed, FRAMES, 30.0);
            let t0 = Instant::now();
            let rr = common::reconstruct_with(method, &with_rest, &truth, lp.settings);
            let tr = t0.elapsed();
            er.push(rr.mean_joint_error);
            writeln!(
                stats,
                "  seed {seed}: {} constrained, reference = rest {:>7.2} mm ({:>4}/{} frames reached, {:>6.1} it/frame, {:>6.1} µs/frame)",
                method.name(),
                rr.mean_joint_error,
                rr.frames_reached,
                rr.frames,
                rr.mean_iterations,
                tr.as_secs_f64() * 1e6 / FRAMES as f64
            )
            .unwrap();
        }
        writeln!(stats, "  mean: {} constrained, reference = rest {:.2} mm", method.name(), mean(&er)).unwrap();
    }
    // The same with damped least squares alone (the Jacobian peer, same limits).
    let mut ed = Vec::new();
    for seed in 1..=3 {
        let truth = synth_motion(constrained.rig(), seed, FRAMES, 30.0);
        let t0 = Instant::now();
        let rd = common::reconstruct_with(Method::Dls, &constrained, &truth, lp.settings);
        let td = t0.elapsed();
        ed.push(rd.mean_joint_error);
        writeln!(
            stats,
            "  seed {seed}: dls constrained {:>7.2} mm ({:>4}/{} frames reached, {:>6.1} it/frame, {:>6.1} µs/frame)",
            rd.mean_joint_error,
            rd.frames_reached,
            rd.frames,
            rd.mean_iterations,
            td.as_secs_f64() * 1e6 / FRAMES as f64
        )
        .unwrap();
    }
    writeln!(stats, "  mean: dls constrained {:.2} mm", mean(&ed)).unwrap();
    // The report's marker set (TR-632 §4.3.1: "selected internal joints artificially deleted"):
    // the trunk measured too, a goal at the chest's tail (its point, then its rotation as well),
    // the limbs' inner joints solved; constrained and not, both methods.
    for orientation in [false, true] {
        let marked = common::with_trunk_marker(&constrained, orientation);
        let mut marked_free = Problem::new(without_limits(marked.rig()), marked.goals().to_vec(), marked.root()).unwrap();
        marked_free.set_reference(marked.reference().clone()).unwrap();
        let what = if orientation { "chest point and rotation" } else { "chest point" };
        for method in [Method::Fabrik, Method::Dls] {
            for (limits, p) in [("constrained", &marked), ("unconstrained", &marked_free)] {
                let mut e = Vec::new();
                let mut line = String::new();
                for seed in 1..=3 {
                    let truth = synth_motion(constrained.rig(), seed, FRAMES, 30.0);
                    let t0 = Instant::now();
                    let r = common::reconstruct_with(method, p, &truth, lp.settings);
                    let t = t0.elapsed();
                    e.push(r.mean_joint_error);
                    line += &format!(
                        " | seed {seed}: {:.2} mm, {}/{} reached, {:.1} it, {:.1} µs/frame",
                        r.mean_joint_error,
                        r.frames_reached,
                        r.frames,
                        r.mean_iterations,
                        t.as_secs_f64() * 1e6 / FRAMES as f64
                    );
                }
                writeln!(stats, "  trunk marked ({what}), {} {limits}: mean {:.2} mm{line}", method.name(), mean(&e)).unwrap();
            }
        }
    }

    eprintln!("\n{stats}");
    let target_dir = std::env::var_os("CARGO_TARGET_DIR").map_or_else(
        || std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../target"),
        std::path::PathBuf::from,
    );
    let path = target_dir.join("sinew-bench-stats.txt");
    if let Err(e) = std::fs::create_dir_all(&target_dir).and_then(|()| std::fs::write(&path, &stats)) {
        eprintln!("could not write {}: {e}", path.display());
    }

    // Criterion timings.
    for (group, name, lp, cases) in &sets {
        bench_single(c, group, name, Method::Fabrik, lp.settings, cases);
    }
    for (group, name, lp, cases) in &sets[..1] {
        bench_single(c, &format!("dls_{group}"), name, Method::Dls, lp.settings, cases);
    }
    bench_single(c, "dls_chain10_constrained", "in_limit_targets", Method::Dls, limited.settings, &sets[3].3);
    {
        let mut g = c.benchmark_group("textbook_alg1");
        let mut k = 0usize;
        g.bench_function("reachable", |b| {
            b.iter(|| {
                let mut p = straight_joints.clone();
                let t = reachable[k % CASES];
                k += 1;
                black_box(textbook_alg1(&mut p, &d, black_box(t), tb.tolerance, 10_000))
            })
        });
        g.finish();
    }
    bench_single(c, "humanoid13", "tracking", Method::Fabrik, humanoid.settings, &humanoid.frames);
    bench_single(c, "humanoid13_constrained", "tracking", Method::Fabrik, humanoid_limited.settings, &humanoid_limited.frames);
    bench_single(c, "dls_humanoid13", "tracking", Method::Dls, dls_humanoid.settings, &dls_humanoid.frames);
    bench_single(
        c,
        "dls_humanoid13_constrained",
        "tracking",
        Method::Dls,
        dls_humanoid_limited.settings,
        &dls_humanoid_limited.frames,
    );
}

fn config() -> Criterion {
    Criterion::default().warm_up_time(Duration::from_secs(1)).measurement_time(Duration::from_secs(3)).sample_size(30)
}

criterion_group! {
    name = fabrik;
    config = config();
    targets = benches
}

fn main() {
    fabrik();
    Criterion::default().configure_from_args().final_summary();
}
