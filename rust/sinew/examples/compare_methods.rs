//! The comparison of every method (issue #14, "Benchmark and report"): the set-ups of the FABRIK
//! tech report's chapter 4 (TR-632, Tables 4.1–4.3 and 4.5, Figures 4.4 and 4.5) and of Nilsson's
//! thesis chapter 4 (Tables 4.1–4.3, 4.5 and 4.7), measured on this machine for every method in
//! `Method::ALL` (methods added later appear by themselves; one that refuses a set-up shows
//! "n/a" with its error). Writes JSON for `bench/compare_methods.py`, which makes the tables in
//! `docs/benchmarks.md` and the figures.
//!
//! ```text
//! cargo run --release -p sinew --example compare_methods -- [--quick] [--out FILE]
//! ```
//!
//! `--quick` runs a tenth of the cases (a smoke test); the default output is
//! `bench/results/compare_methods.json`. Set `SINEW_BENCH_REV` to record the commit.
//!
//! Set-ups (what the papers leave open and what is chosen here is in `docs/benchmarks.md`):
//! - `tr_4.1`: the report's 10-joint chain (`tests/data/paper_chain10.json`, 10 × 900 mm,
//!   tolerance 1e-3 mm) from straight, 1000 targets uniform in its reach (the
//!   core bench's set), cap 10 000 iterations, no stall rule.
//! - `tr_4.2`: 1000 targets 9000.5–20 000 mm from the root; stall at 1e-3 mm per iteration.
//! - `tr_4.5`: 1000 targets inside the constrained chain's limits (FK of in-limit poses), on the
//!   constrained chain and on the unconstrained one.
//! - `tr_fig_4.4`: iterations against the distance from the straight chain's end to the target.
//! - `tr_fig_4.5`: error against time on the figure 4.4 target, 6000 mm from the straight end.
//! - `thesis_4.1`/`4.2`: a chain of 6 unit bones (18 DoF) along a path of nine targets in range
//!   (tolerance 0.01) and out of range (stall at 0.001 per iteration), each warm-started from
//!   the last, cap 1000, the path cycled.
//! - `thesis_4.3`: a chain of 60 unit bones (180 DoF), nine targets in range.
//! - `thesis_4.5`/`4.7`: a tree of 11 unit bones (33 DoF, a trunk of 3 and four branches of 2:
//!   each effector moves 15 DoF, 9 of them shared), a path of four target sets in range and out.
//! - `settling`: out-of-range targets on the report's chain; per method, the effector's steps over
//!   the second half of its iterations (up to 400): how many turn back.
//!
//! Time per iteration is time per solve over iterations, so it carries each solve's fixed cost.
//! Every set-up is run three times over and timed by its fastest run (the machine is shared).
//! Each is set against an estimate of the arithmetic (flops) of one iteration and this machine's
//! rate on a plain dense kernel: the factor is how much slower than that arithmetic alone the
//! iteration runs.

use std::collections::BTreeMap;
use std::f64::consts::FRAC_PI_2;
use std::hint::black_box;
use std::path::PathBuf;
use std::time::Instant;

use glam::{DQuat, DVec3};
use serde::Serialize;
use sinew::{Bone, Goal, JointLimit, LoadedProblem, Method, Pose, Problem, Reference, Rig, RootMode, Solution, SolveSettings, StopReason};

// ---------------------------------------------------------------------------------------------
// Small helpers

/// SplitMix64 (the tests' and the core bench's generator, so the target sets match).
struct Rng(u64);

impl Rng {
    fn new(seed: u64) -> Self {
        Self(seed ^ 0x9E37_79B9_7F4A_7C15)
    }
    fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }
    fn f64(&mut self) -> f64 {
        (self.next_u64() >> 11) as f64 / (1u64 << 53) as f64
    }
    fn range(&mut self, lo: f64, hi: f64) -> f64 {
        lo + (hi - lo) * self.f64()
    }
    fn unit(&mut self) -> DVec3 {
        loop {
            let v = DVec3::new(self.range(-1.0, 1.0), self.range(-1.0, 1.0), self.range(-1.0, 1.0));
            let l = v.length_squared();
            if l > 1e-6 && l <= 1.0 {
                return v / l.sqrt();
            }
        }
    }
    fn in_ball(&mut self, r: f64) -> DVec3 {
        loop {
            let v = DVec3::new(self.range(-1.0, 1.0), self.range(-1.0, 1.0), self.range(-1.0, 1.0));
            if v.length_squared() <= 1.0 {
                return v * r;
            }
        }
    }
    fn rotation(&mut self, max_angle: f64) -> DQuat {
        let axis = self.unit();
        DQuat::from_axis_angle(axis, self.range(0.0, max_angle))
    }
}

fn load(name: &str) -> LoadedProblem {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../tests/data").join(name);
    Problem::from_json(&std::fs::read_to_string(&path).unwrap()).unwrap()
}

fn mean(v: &[f64]) -> f64 {
    if v.is_empty() { f64::NAN } else { v.iter().sum::<f64>() / v.len() as f64 }
}

fn median(v: &[f64]) -> f64 {
    let mut v = v.to_vec();
    v.sort_by(f64::total_cmp);
    if v.is_empty() { f64::NAN } else { v[v.len() / 2] }
}

fn command_output(cmd: &str, args: &[&str]) -> String {
    std::process::Command::new(cmd).args(args).output().ok().map(|o| String::from_utf8_lossy(&o.stdout).trim().to_owned()).unwrap_or_default()
}

/// A chain of `n` bones of length `len` straight up +Z from the origin.
fn chain(n: usize, len: f64) -> Rig {
    Rig::new(
        (0..n)
            .map(|i| Bone {
                name: format!("b{i}"),
                parent: i.checked_sub(1),
                rest_head: if i == 0 { DVec3::ZERO } else { DVec3::new(0.0, len, 0.0) },
                rest_rotation: if i == 0 { DQuat::from_rotation_x(FRAC_PI_2) } else { DQuat::IDENTITY },
                length: len,
                limit: JointLimit::FREE,
            })
            .collect(),
    )
    .unwrap()
}

/// The thesis' four-effector tree (figure 4.1(b), as chosen here): a trunk of three unit bones
/// up +Z, and at its top four branches of two unit bones, leaning 45° toward ±X and ±Y. 11
/// bones, 33 DoF; each effector moves 5 bones (15 DoF), the trunk's 9 shared by all four.
fn tree33() -> (Rig, Vec<usize>) {
    let mut bones = chain(3, 1.0).bones().to_vec();
    let leans = [DQuat::from_rotation_z(-0.785), DQuat::from_rotation_z(0.785), DQuat::from_rotation_x(0.785), DQuat::from_rotation_x(-0.785)];
    let mut tips = Vec::new();
    for (k, lean) in leans.into_iter().enumerate() {
        let first = bones.len();
        bones.push(Bone { name: format!("branch{k}.0"), parent: Some(2), rest_head: DVec3::Y, rest_rotation: lean, length: 1.0, limit: JointLimit::FREE });
        bones.push(Bone { name: format!("branch{k}.1"), parent: Some(first), rest_head: DVec3::Y, rest_rotation: DQuat::IDENTITY, length: 1.0, limit: JointLimit::FREE });
        tips.push(first + 1);
    }
    (Rig::new(bones).unwrap(), tips)
}

// ---------------------------------------------------------------------------------------------
// Arithmetic per iteration

/// What one iteration of `method` costs in floating-point operations, roughly, on a problem with
/// `b` moving bones (3 DoF each), `m` residual rows and `n = 3b` unknowns, one goal per bone's
/// path (chains) or `k` goals on the shared ones (trees). Counted: forward kinematics of the trial
/// pose (~80 per bone: a quaternion product and a rotated offset), the step applied (~150 per
/// bone: a rotation from a rotation vector, a product, a renormalisation), the residual (10 per
/// row) and the levers (6 per unknown and goal); then per method its linear algebra: the
/// transpose two products with `J` (`4mn`); the SVD methods forming `J` (`2mn`), its SVD with
/// both factors (Golub–Reinsch on the tall `Jᵀ`: `14 n m² + 8 m³`, GVL table 8.6.1) and `Jᵀ y`
/// (`2mn`), SDLS `6mn` more for its norms; `dls` its Gram matrix in 3 × 3 blocks (`~30 b k²`)
/// and Cholesky (`m³/3 + 2m²`); FABRIK two passes over the joints (~30 per bone) and the rotations
/// fitted at the end (~300 per bone per solve, spread over its iterations).
fn flops_per_iteration(method: Method, b: f64, m: f64, k: f64, iterations: f64) -> f64 {
    let n = 3.0 * b;
    let common = 230.0 * b + 10.0 * m + 6.0 * n * k;
    let (tall, wide) = (n.max(m), n.min(m));
    let svd = 14.0 * tall * wide * wide + 8.0 * wide.powi(3);
    match method {
        Method::Fabrik => 30.0 * b + 300.0 * b / iterations.max(1.0),
        Method::Dls => common + 30.0 * b * k * k + m.powi(3) / 3.0 + 2.0 * m * m + 2.0 * m * n,
        Method::JacobianTranspose => common + 2.0 * m * n + 4.0 * m * n,
        Method::JacobianPinv | Method::SvdDls => common + 2.0 * m * n + svd + 2.0 * m * m + 2.0 * m * n,
        Method::Sdls => common + 2.0 * m * n + svd + 2.0 * m * m + 8.0 * m * n,
        // J formed, the gradient Jᵀe, the two-loop recursion over 10 pairs (4 n each), one trial
        // step (line-search halvings add a `common` each, not counted).
        Method::Nlp => common + 2.0 * m * n + 2.0 * m * n + 40.0 * n,
        #[allow(unreachable_patterns)] // methods added later: no estimate yet
        _ => f64::NAN,
    }
}

/// This machine's rate on plain dense arithmetic (flops per nanosecond): `y = A x` for a 24 × 540
/// matrix in plain loops (the size of the thesis' largest `J`), best of many runs.
fn calibrate() -> f64 {
    let (m, n) = (24, 540);
    let a: Vec<f64> = (0..m * n).map(|i| ((i * 7) % 13) as f64 * 0.1).collect();
    let x: Vec<f64> = (0..n).map(|i| (i % 5) as f64 * 0.3).collect();
    let mut y = vec![0.0; m];
    let mut best = f64::INFINITY;
    for _ in 0..2000 {
        let t = Instant::now();
        for (j, xj) in x.iter().enumerate() {
            for (yi, aij) in y.iter_mut().zip(&a[j * m..(j + 1) * m]) {
                *yi += aij * xj;
            }
        }
        black_box(&mut y);
        best = best.min(t.elapsed().as_nanos() as f64);
    }
    (2 * m * n) as f64 / best
}

// ---------------------------------------------------------------------------------------------
// Results

/// Each set-up runs this many times; its time is the fastest run's.
const PASSES: usize = 3;

#[derive(Debug, Serialize, Default)]
struct MethodResult {
    method: String,
    /// Why the method gives no figures here (it refused the set-up).
    na: Option<String>,
    solves: usize,
    iterations_mean: f64,
    iterations_median: f64,
    iterations_max: f64,
    /// Solves that met every goal.
    reached: usize,
    reached_within_2000: usize,
    /// Solves that stopped because the effectors stopped moving (or FABRIK's out-of-reach pass).
    settled: usize,
    /// Solves that hit the iteration cap.
    capped: usize,
    /// Mean final distance from the effectors to their targets (worst goal per solve).
    error_mean: f64,
    /// Mean time per solve (µs) and per iteration (µs).
    us_per_solve: f64,
    us_per_iteration: f64,
    flops_per_iteration: f64,
    /// `us_per_iteration` over the time the flops take at the calibration rate.
    factor: f64,
}

#[derive(Debug, Serialize)]
struct SetupResult {
    id: String,
    paper: String,
    title: String,
    model: String,
    bones: usize,
    dof: usize,
    effectors: usize,
    settings: SolveSettings,
    cases: usize,
    methods: Vec<MethodResult>,
}

/// One solve to run: the problem and where it starts (or, for a path, `None`: the last solution).
struct Case {
    problem: Problem,
    start: Option<Pose>,
}

/// Runs `cases` (`cycles` times over, each warm-started from the last when `start` is `None`)
/// with every method, timing each solve.
#[allow(clippy::too_many_arguments)] // one set-up's description, spelled out
fn run_setup(id: &str, paper: &str, title: &str, model: &str, settings: SolveSettings, first_start: &Pose, cases: &[Case], cycles: usize, rate: f64) -> SetupResult {
    let problem0 = &cases[0].problem;
    let b = problem0.rig().len();
    let goals = problem0.goals().len();
    let m = 3 * goals;
    // Goals per shared bone: the trunk of the tree carries every goal.
    let k = if goals > 1 { 1.0 + (goals as f64 - 1.0) * 9.0 / 33.0 } else { 1.0 };
    let mut methods = Vec::new();
    for method in Method::ALL {
        let mut solver = method.solver(settings).unwrap();
        let mut r = MethodResult { method: method.name().into(), ..MethodResult::default() };
        let mut iterations = Vec::new();
        let mut errors = Vec::new();
        // Every solve is deterministic, so each pass repeats the last; the time is the fastest
        // pass's (the machine is shared and noisy), the counts the first's.
        let mut time = f64::INFINITY;
        'passes: for pass in 0..PASSES {
            let mut pass_time = 0.0;
            let mut start = first_start.clone();
            for _ in 0..cycles {
                for case in cases {
                    if let Some(s) = &case.start {
                        start.clone_from(s);
                    }
                    let t = Instant::now();
                    let sol = match solver.solve(&case.problem, &start) {
                        Ok(sol) => sol,
                        Err(e) => {
                            r.na = Some(e.to_string());
                            break 'passes;
                        }
                    };
                    pass_time += t.elapsed().as_secs_f64() * 1e6;
                    if pass == 0 {
                        iterations.push(f64::from(sol.iterations));
                        errors.push(sol.worst_residual());
                        r.reached += usize::from(sol.reached);
                        r.reached_within_2000 += usize::from(sol.reached && sol.iterations <= 2000);
                        r.settled += usize::from(matches!(sol.stop, StopReason::Stalled | StopReason::OutOfReach));
                        r.capped += usize::from(sol.stop == StopReason::IterationLimit);
                    }
                    start = sol.pose;
                }
            }
            time = time.min(pass_time);
        }
        if r.na.is_none() {
            r.solves = iterations.len();
            r.iterations_mean = mean(&iterations);
            r.iterations_median = median(&iterations);
            r.iterations_max = iterations.iter().copied().fold(0.0, f64::max);
            r.error_mean = mean(&errors);
            r.us_per_solve = time / r.solves as f64;
            r.us_per_iteration = time / iterations.iter().sum::<f64>().max(1.0);
            r.flops_per_iteration = flops_per_iteration(method, b as f64, m as f64, k, r.iterations_mean);
            r.factor = r.us_per_iteration * 1e3 * rate / r.flops_per_iteration;
        }
        eprintln!(
            "{id:<12} {:<20} it {:>9.1} (max {:>6}) reached {:>4}/{:<4} settled {:>4} capped {:>4} {:>10.1} µs/solve {:>8.2} µs/it ×{:.1}",
            r.method, r.iterations_mean, r.iterations_max, r.reached, r.solves, r.settled, r.capped, r.us_per_solve, r.us_per_iteration, r.factor
        );
        methods.push(r);
    }
    SetupResult {
        id: id.into(),
        paper: paper.into(),
        title: title.into(),
        model: model.into(),
        bones: b,
        dof: 3 * b,
        effectors: goals,
        settings,
        cases: cases.len() * cycles,
        methods,
    }
}

fn with_targets(problem: &Problem, targets: &[DVec3]) -> Problem {
    let mut p = problem.clone();
    for (gi, t) in targets.iter().enumerate() {
        p.set_target(gi, *t).unwrap();
    }
    p
}

// ---------------------------------------------------------------------------------------------
// Figures

#[derive(Debug, Serialize)]
struct DistancePoint {
    distance: f64,
    targets: usize,
    /// Per method: mean iterations (capped solves count as the cap) and how many hit the cap.
    iterations: BTreeMap<String, (f64, usize)>,
}

/// TR figure 4.4: iterations against the distance from the straight chain's end to the target.
fn figure_4_4(lp: &LoadedProblem, settings: SolveSettings, per_distance: usize) -> Vec<DistancePoint> {
    let end = DVec3::new(0.0, 0.0, 9000.0);
    let mut rng = Rng::new(44);
    let mut out = Vec::new();
    for distance in [250.0, 500.0, 1000.0, 2000.0, 3000.0, 4000.0, 5000.0, 6000.0, 8000.0, 10000.0, 12000.0, 14000.0, 16000.0] {
        let targets: Vec<DVec3> = (0..100_000).map(|_| end + rng.unit() * distance).filter(|t| t.length() <= 0.999 * 9000.0).take(per_distance).collect();
        let mut iterations = BTreeMap::new();
        for method in Method::ALL {
            let mut solver = method.solver(settings).unwrap();
            let runs: Vec<Solution> = targets.iter().filter_map(|t| solver.solve(&with_targets(&lp.problem, &[*t]), &lp.pose).ok()).collect();
            let its: Vec<f64> = runs.iter().map(|s| f64::from(s.iterations)).collect();
            let capped = runs.iter().filter(|s| s.stop == StopReason::IterationLimit).count();
            iterations.insert(method.name().to_owned(), (mean(&its), capped));
        }
        eprintln!("fig 4.4 d = {distance}: {iterations:?}");
        out.push(DistancePoint { distance, targets: targets.len(), iterations });
    }
    out
}

#[derive(Debug, Serialize)]
struct ErrorPoint {
    iterations: u32,
    us: f64,
    error: f64,
}

/// TR figure 4.5: the error after `k` iterations against the time a solve capped at `k` takes,
/// on the figure 4.4 target (6000 mm from the straight end).
fn figure_4_5(lp: &LoadedProblem, settings: SolveSettings) -> BTreeMap<String, Vec<ErrorPoint>> {
    let problem = with_targets(&lp.problem, &[DVec3::new(4800.0, 0.0, 5400.0)]);
    let mut out = BTreeMap::new();
    for method in Method::ALL {
        let full = method.solver(settings).unwrap().solve(&problem, &lp.pose);
        let Ok(full) = full else { continue };
        // Capped solves below the method's own count, then the uncapped solve itself (FABRIK's
        // hybrid budgets its finish from the cap, so its capped solves are not its iterations).
        let mut caps: Vec<u32> = (0..40).map(|i| (1.25f64.powi(i)).round() as u32).filter(|&k| k < full.iterations).collect();
        caps.dedup();
        caps.push(u32::MAX);
        let points = caps
            .into_iter()
            .map(|k| {
                let cap = if k == u32::MAX { settings.max_iterations } else { k };
                let mut solver = method.solver(SolveSettings { max_iterations: cap, ..settings }).unwrap();
                let reps = if cap < 200 || full.iterations < 200 { 20 } else { 3 };
                let mut best = f64::INFINITY;
                let mut sol = None;
                for _ in 0..reps {
                    let t = Instant::now();
                    let s = solver.solve(black_box(&problem), black_box(&lp.pose)).unwrap();
                    best = best.min(t.elapsed().as_secs_f64() * 1e6);
                    sol = Some(s);
                }
                let sol = sol.unwrap();
                ErrorPoint { iterations: sol.iterations, us: best, error: sol.worst_residual() }
            })
            .collect();
        out.insert(method.name().to_owned(), points);
    }
    out
}

#[derive(Debug, Serialize)]
struct SettlingMethod {
    /// Iterations to the method's own stop (at most 10 000) and why it stopped.
    iterations: u32,
    stop: StopReason,
    /// The iterations looked at: the second half of the first 400 at most.
    window: (u32, u32),
    /// Effector steps in the window (steps of every effector together, as one vector).
    steps: usize,
    /// Steps that turn back against the one before (negative dot product).
    reversals: usize,
    /// Zigzags: turning back on two successive steps (there, back, there again).
    zigzags: usize,
    /// The largest step in the last quarter of the window, and in its first quarter (rig units).
    late_step: f64,
    early_step: f64,
}

#[derive(Debug, Serialize)]
struct Settling {
    case: String,
    methods: BTreeMap<String, SettlingMethod>,
}

/// Targets out of reach: does each method's effector settle or zigzag? The pose after `k`
/// iterations is read from a solve capped at `k` (a solve is a pure function of its cap), over the
/// second half of the first 400 iterations at most. The thesis' out-of-range stop: no residual row
/// moving more than `stall` in an iteration.
fn settling(cases: &[(String, Problem, Pose, f64)]) -> Vec<Settling> {
    cases
        .iter()
        .map(|(label, problem, start, stall)| {
            let settings = |max_iterations| SolveSettings { max_iterations, tolerance: 1e-3, stall_tolerance: *stall };
            let effectors = |pose: &Pose| {
                let f = problem.rig().forward(pose);
                problem.goals().iter().map(|g| f.effector(g.bone, g.use_tail)).collect::<Vec<DVec3>>()
            };
            let mut methods = BTreeMap::new();
            for method in Method::ALL {
                let Ok(full) = method.solver(settings(10_000)).unwrap().solve(problem, start) else { continue };
                let last = full.iterations.min(400);
                let first = last / 2;
                let points: Vec<Vec<DVec3>> = (first..=last)
                    .map(|k| if k == 0 { effectors(start) } else { effectors(&method.solver(settings(k)).unwrap().solve(problem, start).unwrap().pose) })
                    .collect();
                let steps: Vec<Vec<DVec3>> = points.windows(2).map(|w| w[1].iter().zip(&w[0]).map(|(a, b)| *a - *b).collect::<Vec<DVec3>>()).collect();
                let norm = |d: &[DVec3]| d.iter().map(|x| x.length_squared()).sum::<f64>().sqrt();
                let steps: Vec<Vec<DVec3>> = steps.into_iter().filter(|d| norm(d) > 0.0).collect();
                let dot = |a: &[DVec3], b: &[DVec3]| a.iter().zip(b).map(|(x, y)| x.dot(*y)).sum::<f64>();
                let turns: Vec<bool> = steps.windows(2).map(|w| dot(&w[0], &w[1]) < 0.0).collect();
                let q = steps.len() / 4;
                let largest = |s: &[Vec<DVec3>]| s.iter().map(|d| norm(d)).fold(0.0, f64::max);
                methods.insert(
                    method.name().to_owned(),
                    SettlingMethod {
                        iterations: full.iterations,
                        stop: full.stop,
                        window: (first, last),
                        steps: steps.len(),
                        reversals: turns.iter().filter(|&&t| t).count(),
                        zigzags: turns.windows(2).filter(|t| t[0] && t[1]).count(),
                        late_step: if q > 0 { largest(&steps[3 * q..]) } else { 0.0 },
                        early_step: if q > 0 { largest(&steps[..q]) } else { 0.0 },
                    },
                );
            }
            eprintln!("settling {label}: {}", methods.iter().map(|(m, r)| format!("{m} {} it {} zigzags", r.iterations, r.zigzags)).collect::<Vec<_>>().join(", "));
            Settling { case: label.clone(), methods }
        })
        .collect()
}

// ---------------------------------------------------------------------------------------------

#[derive(Debug, Serialize)]
struct Report {
    command: String,
    rev: String,
    date: String,
    machine: String,
    rustc: String,
    /// The calibration kernel's rate, flops per nanosecond.
    flops_per_ns: f64,
    methods: Vec<String>,
    setups: Vec<SetupResult>,
    figure_4_4: Vec<DistancePoint>,
    figure_4_5: BTreeMap<String, Vec<ErrorPoint>>,
    settling: Vec<Settling>,
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let quick = args.iter().any(|a| a == "--quick");
    let out = args.iter().position(|a| a == "--out").and_then(|i| args.get(i + 1)).map_or_else(
        || PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../bench/results/compare_methods.json"),
        PathBuf::from,
    );
    let scale = |n: usize| if quick { n.div_ceil(10) } else { n };
    let rate = calibrate();
    eprintln!("calibration: {rate:.2} flops/ns");

    let chain10 = load("paper_chain10.json");
    let chain10_limited = load("paper_chain10_constrained.json");
    let reach = 9000.0;
    let base = DVec3::ZERO;
    let mut setups = Vec::new();

    // TR Tables 4.1 and 4.2 (4.3 is their time per iteration).
    let tr = |stall| SolveSettings { max_iterations: 10_000, tolerance: 1e-3, stall_tolerance: stall };
    let mut rng = Rng::new(2009);
    let reachable: Vec<Case> = (0..scale(1000)).map(|_| Case { problem: with_targets(&chain10.problem, &[base + rng.in_ball(reach * 0.999)]), start: Some(chain10.pose.clone()) }).collect();
    setups.push(run_setup("tr_4.1", "TR-632 Table 4.1 (and 4.3)", "10-joint chain, reachable targets", "chain10 (10 × 900 mm)", tr(0.0), &chain10.pose, &reachable, 1, rate));
    let mut rng = Rng::new(4);
    let unreachable: Vec<Case> = (0..scale(1000))
        .map(|_| Case { problem: with_targets(&chain10.problem, &[base + rng.unit() * rng.range(reach + 0.5, 20000.0)]), start: Some(chain10.pose.clone()) })
        .collect();
    setups.push(run_setup("tr_4.2", "TR-632 Table 4.2", "10-joint chain, unreachable targets", "chain10 (10 × 900 mm)", tr(1e-3), &chain10.pose, &unreachable, 1, rate));

    // TR Table 4.5: targets inside the constrained chain's limits, constrained and not.
    let mut rng = Rng::new(42);
    let rig = chain10_limited.problem.rig();
    let in_limits: Vec<DVec3> = (0..scale(1000))
        .map(|_| {
            let truth = Pose { rotations: rig.bones().iter().map(|b| b.limit.clamp(rng.rotation(1.2))).collect(), root_translation: DVec3::ZERO, scales: Vec::new() };
            rig.forward(&truth).tails[9]
        })
        .collect();
    for (lp, id, title) in [(&chain10, "tr_4.5_free", "10-joint chain, unconstrained, targets inside the limits"), (&chain10_limited, "tr_4.5_limits", "10-joint chain, constrained (cones and twists), targets inside the limits")] {
        let cases: Vec<Case> = in_limits.iter().map(|t| Case { problem: with_targets(&lp.problem, &[*t]), start: Some(lp.pose.clone()) }).collect();
        setups.push(run_setup(id, "TR-632 Table 4.5", title, "chain10 (10 × 900 mm)", tr(0.0), &lp.pose, &cases, 1, rate));
    }

    // The thesis' chapter 4: paths of targets, each solve warm-started from the last.
    let thesis = |stall| SolveSettings { max_iterations: 1000, tolerance: 0.01, stall_tolerance: stall };
    let mut thesis_out: Vec<Problem> = Vec::new();
    let mut tree_out: Vec<Problem> = Vec::new();
    let path = |rng: &mut Rng, count: usize, lo: f64, hi: f64, reach: f64| -> Vec<DVec3> {
        (0..count)
            .map(|_| {
                // The upper half: the chains start straight up.
                let mut d = rng.unit();
                d.z = d.z.abs();
                d * rng.range(lo, hi) * reach
            })
            .collect()
    };
    for (n, in_range, id, paper, cycles) in [
        (6, true, "thesis_4.1", "thesis Table 4.1", 40),
        (6, false, "thesis_4.2", "thesis Table 4.2", 40),
        (60, true, "thesis_4.3", "thesis Table 4.3", 4),
    ] {
        let rig = chain(n, 1.0);
        let mut problem = Problem::new(rig.clone(), vec![Goal::new(n - 1, DVec3::X)], RootMode::Pinned).unwrap();
        // The thesis' methods as published: no reference pose.
        problem.set_reference(Reference::LeastMotion).unwrap();
        let mut rng = Rng::new(if in_range { 18 } else { 180 });
        let targets = if in_range { path(&mut rng, 9, 0.35, 0.85, n as f64) } else { path(&mut rng, 9, 1.2, 1.6, n as f64) };
        let cases: Vec<Case> = targets.iter().map(|t| Case { problem: with_targets(&problem, &[*t]), start: None }).collect();
        if id == "thesis_4.2" {
            thesis_out.push(cases[0].problem.clone());
        }
        let title = format!("{n}-bone chain ({} DoF), nine targets {}", 3 * n, if in_range { "in range" } else { "out of range" });
        let settings = thesis(if in_range { 0.0 } else { 1e-3 });
        setups.push(run_setup(id, paper, &title, &format!("chain of {n} unit bones"), settings, &Pose::rest(n), &cases, scale(cycles), rate));
    }
    let (tree, tips) = tree33();
    let mut problem = Problem::new(tree.clone(), tips.iter().map(|&t| Goal::new(t, DVec3::X)).collect(), RootMode::Pinned).unwrap();
    problem.set_reference(Reference::LeastMotion).unwrap();
    for (in_range, id, paper) in [(true, "thesis_4.5", "thesis Table 4.5"), (false, "thesis_4.7", "thesis Table 4.7")] {
        let mut rng = Rng::new(if in_range { 33 } else { 330 });
        let sets: Vec<Vec<DVec3>> = (0..4)
            .map(|_| {
                if in_range {
                    let truth = Pose { rotations: (0..tree.len()).map(|_| rng.rotation(1.0)).collect(), root_translation: DVec3::ZERO, scales: Vec::new() };
                    let f = tree.forward(&truth);
                    tips.iter().map(|&t| f.tails[t]).collect()
                } else {
                    let rest = tree.forward(&Pose::rest(tree.len()));
                    tips.iter().map(|&t| (rest.tails[t].normalize() + rng.in_ball(0.3)).normalize() * rng.range(6.5, 8.0)).collect()
                }
            })
            .collect();
        let cases: Vec<Case> = sets.iter().map(|t| Case { problem: with_targets(&problem, t), start: None }).collect();
        if !in_range {
            tree_out.push(cases[0].problem.clone());
        }
        let title = format!("four-effector tree (33 DoF), four target sets {}", if in_range { "in range" } else { "out of range" });
        let settings = thesis(if in_range { 0.0 } else { 1e-3 });
        setups.push(run_setup(id, paper, &title, "tree of 11 unit bones", settings, &Pose::rest(tree.len()), &cases, scale(40), rate));
    }

    let figure_4_4 = figure_4_4(&chain10, tr(0.0), scale(20));
    let figure_4_5 = figure_4_5(&chain10, tr(0.0));
    // Out of reach, from a bent start: the report's chain toward four targets (the tests' three
    // and one 1392 mm beyond reach), the thesis' 18-DoF chain toward its first out-of-range
    // target, and the tree toward its first out-of-range set.
    let bent = Pose {
        rotations: (0..10).map(|i| sinew::geometry::from_rotation_vector(DVec3::new(0.15, 0.05 * i as f64, -0.1))).collect(),
        root_translation: DVec3::ZERO,
        scales: Vec::new(),
    };
    let mut settle_cases: Vec<(String, Problem, Pose, f64)> = [DVec3::new(12000.0, 0.0, 3000.0), DVec3::new(-4000.0, 9000.0, -6000.0), DVec3::new(0.0, 0.0, -15000.0), DVec3::new(6000.0, 6000.0, 6000.0)]
        .iter()
        .map(|t| (format!("chain10 → ({}, {}, {}) mm", t.x, t.y, t.z), with_targets(&chain10.problem, &[*t]), bent.clone(), 1e-3))
        .collect();
    settle_cases.push(("chain of 6 → the thesis' first out-of-range target".into(), thesis_out[0].clone(), Pose::rest(6), 1e-3));
    settle_cases.push(("tree33 → the thesis' first out-of-range set".into(), tree_out[0].clone(), Pose::rest(11), 1e-3));
    let settling = settling(&settle_cases);

    let report = Report {
        command: format!("cargo run --release -p sinew --example compare_methods --{}", if quick { " --quick" } else { "" }),
        rev: std::env::var("SINEW_BENCH_REV").unwrap_or_else(|_| command_output("git", &["rev-parse", "--short", "HEAD"])),
        date: command_output("date", &["-u", "+%Y-%m-%d"]),
        machine: format!(
            "{} × {}",
            command_output("nproc", &[]),
            std::fs::read_to_string("/proc/cpuinfo").ok().and_then(|c| c.lines().find(|l| l.starts_with("model name")).map(|l| l.split(':').nth(1).unwrap_or("").trim().to_owned())).unwrap_or_default()
        ),
        rustc: command_output("rustc", &["--version"]),
        flops_per_ns: rate,
        methods: Method::ALL.iter().map(|m| m.name().to_owned()).collect(),
        setups,
        figure_4_4,
        figure_4_5,
        settling,
    };
    if let Some(dir) = out.parent() {
        std::fs::create_dir_all(dir).unwrap();
    }
    std::fs::write(&out, serde_json::to_string_pretty(&report).unwrap()).unwrap();
    eprintln!("wrote {}", out.display());
}
