//! The FABRIK tech report's test models (§4.1, figure 4.1) as data files in `tests/data/`,
//! loaded through the JSON problem format and solved; see `tests/data/paper_models.md` for how
//! each model was built. Millimetres throughout.
//!
//! For every model: the targets in the file are reached within the file's tolerance, the
//! iterations stay under a bound (observed figure in a comment, bound with margin), no limit is
//! violated, FK of the returned pose keeps every bone length and rest offset, and solving again
//! from the solution is a fixed point (0 or 1 iterations, pose unchanged within 1e-9 rad).
//! Iteration figures were observed on the core as of 5197955; the bounds leave room for the
//! solver to change without hiding a regression of an order of magnitude.

mod common;

use common::{
    Rng, check_fixed_point, check_solution, fk, load, mean, median, reconstruct, synth_motion, without_limits,
};
use glam::DVec3;
use sinew::{Fabrik, Goal, LoadedProblem, Method, Pose, Problem, Solution, SolveSettings, Solver, StopReason};

#[allow(dead_code)]
const MODELS: [&str; 6] = [
    "paper_chain10.json",
    "paper_chain10_constrained.json",
    "paper_y_shape.json",
    "paper_hand.json",
    "paper_humanoid13.json",
    "paper_humanoid13_constrained.json",
];

/// Solves a problem from `start` and checks every invariant, including the fixed point.
fn solve_checked(problem: &Problem, settings: SolveSettings, start: &Pose) -> Solution {
    let mut solver = Fabrik::new(settings);
    let sol = solver.solve(problem, start).unwrap();
    if let Err(e) = check_solution(problem, start, &sol, settings.tolerance, 1e-9) {
        panic!("{e}");
    }
    if (sol.reached || sol.stop == StopReason::OutOfReach)
        && let Err(e) = check_fixed_point(&mut solver, problem, &sol, 1e-9) {
            panic!("fixed point: {e}");
        }
    sol
}

fn solve_file(name: &str) -> (LoadedProblem, Solution) {
    let lp = load(name);
    let sol = solve_checked(&lp.problem, lp.settings, &lp.pose);
    (lp, sol)
}

fn assert_reached(name: &str, lp: &LoadedProblem, sol: &Solution, max_iterations: u32) {
    assert!(
        sol.reached,
        "{name}: not reached after {} iterations ({:?}); residuals {:?} mm, tolerance {} mm",
        sol.iterations, sol.stop, sol.residuals, lp.settings.tolerance
    );
    assert!(sol.iterations <= max_iterations, "{name}: {} iterations (bound {max_iterations})", sol.iterations);
}

#[test]
fn every_paper_model_loads_with_its_documented_shape() {
    // (bones, goals, sub-bases by name)
    let expect: [(&str, usize, usize, &[&str]); 6] = [
        ("paper_chain10.json", 10, 1, &[]),
        ("paper_chain10_constrained.json", 10, 1, &[]),
        ("paper_y_shape.json", 10, 2, &["trunk3"]),
        ("paper_hand.json", 21, 5, &["palm"]),
        ("paper_humanoid13.json", 13, 4, &["pelvis", "chest"]),
        ("paper_humanoid13_constrained.json", 13, 4, &["pelvis", "chest"]),
    ];
    for (name, bones, goals, sub_bases) in expect {
        let lp = load(name);
        let rig = lp.problem.rig();
        assert_eq!(rig.len(), bones, "{name}");
        assert_eq!(lp.problem.goals().len(), goals, "{name}");
        let names: Vec<&str> = lp.problem.topology().sub_bases.iter().map(|&i| rig.bone(i).name.as_str()).collect();
        assert_eq!(names, sub_bases, "{name}");
        assert_eq!(lp.settings.tolerance, 1e-3, "{name}: §4.2 uses a 1e-3 mm tolerance");
    }
    // The chain is 9000 mm long (§4.2) and the constrained files only add limits.
    let chain = load("paper_chain10.json");
    let reach: f64 = chain.problem.rig().bones().iter().map(|b| b.length).sum();
    assert!((reach - 9000.0).abs() < 1e-9);
    for (free, limited) in [
        ("paper_chain10.json", "paper_chain10_constrained.json"),
        ("paper_humanoid13.json", "paper_humanoid13_constrained.json"),
    ] {
        let (a, b) = (load(free), load(limited));
        assert_eq!(a.problem.rig(), &without_limits(b.problem.rig()), "{limited} is {free} plus limits");
        assert_eq!(a.problem.goals(), b.problem.goals());
        assert!(
            b.problem.rig().bones().iter().all(|bone| bone.limit.constrains_rotation()),
            "{limited}: every joint limited"
        );
    }
    // Offset roots: finger roots, clavicles and thighs do not start on their parent's tail.
    for (name, bones) in [
        ("paper_hand.json", &["thumb.meta", "index.meta", "middle.meta", "ring.meta", "little.meta"][..]),
        ("paper_humanoid13.json", &["clavicle.L", "clavicle.R", "thigh.L", "thigh.R"][..]),
    ] {
        let lp = load(name);
        let rig = lp.problem.rig();
        for b in bones {
            let bone = rig.bone(rig.find(b).unwrap());
            let parent_len = rig.bone(bone.parent.unwrap()).length;
            assert!((bone.rest_head - DVec3::new(0.0, parent_len, 0.0)).length() > 5.0, "{name}: {b} should be offset");
        }
    }
}

/// One test per model: solve the file as it is (straight or rest start, the file's settings).
macro_rules! reaches {
    ($($(#[$attr:meta])* $test:ident: $file:literal within $bound:literal;)*) => {$(
        #[test]
        $(#[$attr])*
        fn $test() {
            let (lp, sol) = solve_file($file);
            eprintln!("{}: {} iterations, residuals {:?} mm", $file, sol.iterations, sol.residuals);
            assert_reached($file, &lp, &sol, $bound);
        }
    )*};
}

// Observed iterations in the doc comments (at 5197955); bounds with margin.
reaches! {
    /// 5 iterations (fig. 4.4's 6000 mm move; textbook Alg. 1 needs 15).
    chain10_reaches_its_target: "paper_chain10.json" within 40;
    /// 27 iterations.
    chain10_constrained_reaches_its_target: "paper_chain10_constrained.json" within 100;
    /// 7 iterations (31 at c8d5d11).
    y_shape_reaches_both_targets: "paper_y_shape.json" within 100;
    /// 3 iterations.
    hand_reaches_five_fingertips: "paper_hand.json" within 60;
    /// 5 iterations. At c8d5d11 it stalled at the cap (300) with shin.R 0.37 mm short (27
    /// iterations on 0e2477e); fixed by 91a4de0/5197955 (it was ignored as a core bug).
    humanoid13_reaches_four_effectors: "paper_humanoid13.json" within 120;
    /// 1 iteration. At c8d5d11 it stalled at the cap (300) with shin.R 0.69 mm short; fixed by
    /// 91a4de0/5197955 (it was ignored as a core bug).
    humanoid13_constrained_reaches_four_effectors: "paper_humanoid13_constrained.json" within 250;
}

/// Figure 4.4's set-up on the 10-joint chain: 1000 seeded targets uniform in the reachable ball,
/// each solved from the straight start (200 here to keep the debug run short; the benchmark
/// runs all 1000). Every one is reached.
#[test]
fn chain10_reaches_random_reachable_targets_from_a_straight_start() {
    let lp = load("paper_chain10.json");
    let base = lp.problem.rig().rest_frames().heads[0];
    let mut rng = Rng::new(2009);
    let mut iterations = Vec::new();
    for _ in 0..200 {
        let target = base + rng.in_ball(9000.0 * 0.999);
        let mut p = lp.problem.clone();
        p.set_target(0, target).unwrap();
        let sol = solve_checked(&p, lp.settings, &lp.pose);
        assert!(
            sol.reached,
            "target {target:?}: residual {} after {} iterations",
            sol.worst_residual(),
            sol.iterations
        );
        iterations.push(f64::from(sol.iterations));
    }
    let (m, med) = (mean(&iterations), median(&mut iterations.clone()));
    let max = iterations.iter().copied().fold(0.0, f64::max);
    eprintln!("chain10 random reachable: mean {m:.2}, median {med}, max {max} iterations");
    // Observed at c8d5d11: mean 5.2, median 3, max 31 (textbook Alg. 1 on the same targets:
    // mean 26, median 16; see the benchmark).
    assert!(m <= 10.0 && med <= 8.0 && max <= 60.0, "mean {m}, median {med}, max {max}");
}

/// Unreachable targets: one pass (Alg. 1, lines 1.4–1.12), every bone on the root→target line.
#[test]
fn chain10_unreachable_targets_straighten_in_one_pass() {
    let lp = load("paper_chain10.json");
    let base = lp.problem.rig().rest_frames().heads[0];
    let mut rng = Rng::new(4);
    for _ in 0..100 {
        let dir = rng.unit();
        let target = base + dir * rng.range(9000.5, 20000.0);
        let mut p = lp.problem.clone();
        p.set_target(0, target).unwrap();
        let sol = solve_checked(&p, lp.settings, &lp.pose);
        assert_eq!((sol.iterations, sol.stop), (1, StopReason::OutOfReach));
        let f = fk(p.rig(), &sol.pose);
        for i in 0..10 {
            assert!(((f.tails[i] - f.heads[i]).normalize() - dir).length() < 1e-9);
        }
        assert!((sol.residuals[0] - ((target - base).length() - 9000.0)).abs() < 1e-6);
    }
}

/// The constrained chain reaches targets that are FK of random poses inside its limits (so
/// reachable by construction), from the straight start, without violating a limit.
#[test]
fn chain10_constrained_reaches_targets_inside_its_limits() {
    let lp = load("paper_chain10_constrained.json");
    let rig = lp.problem.rig();
    let mut rng = Rng::new(42);
    let (mut reached, mut iterations) = (0, Vec::new());
    let n = 100;
    for _ in 0..n {
        let truth = Pose {
            rotations: rig.bones().iter().map(|b| b.limit.clamp(rng.rotation(1.2))).collect(),
            root_translation: DVec3::ZERO,
            scales: Vec::new(),
        };
        let target = rig.forward(&truth).tails[9];
        let mut p = lp.problem.clone();
        p.set_target(0, target).unwrap();
        let sol = solve_checked(&p, lp.settings, &lp.pose);
        reached += usize::from(sol.reached);
        iterations.push(f64::from(sol.iterations));
    }
    let (m, med) = (mean(&iterations), median(&mut iterations.clone()));
    eprintln!("chain10 constrained, in-limit targets: {reached}/{n} reached, mean {m:.1}, median {med} iterations");
    // Observed at c8d5d11: 100/100 reached, mean 55, median 42 iterations.
    assert!(reached >= n * 95 / 100, "{reached}/{n} reached");
    assert!(m <= 120.0, "mean {m} iterations");
}

/// Limits that do not bind change nothing: from a bent start inside the limits, where the free
/// chain's answer lands inside every limit, the constrained chain returns exactly that answer
/// (Alg. 1 with its Gauss–Newton finish, its limits checked on the answer); where it breaks a
/// limit, the constrained answer still reaches the target inside every limit
/// (`solve_checked`). Targets and starts are FK of random in-limit poses.
#[test]
fn chain10_constrained_limits_that_do_not_bind_change_nothing() {
    let lp = load("paper_chain10_constrained.json");
    let rig = lp.problem.rig();
    let mut free = Problem::new(without_limits(rig), lp.problem.goals().to_vec(), lp.problem.root()).unwrap();
    free.set_reference(lp.problem.reference().clone()).unwrap();
    let mut rng = Rng::new(7);
    let mut in_limit_pose = |angle: f64| Pose {
        rotations: rig.bones().iter().map(|b| b.limit.clamp(rng.rotation(angle))).collect(),
        root_translation: DVec3::ZERO,
        scales: Vec::new(),
    };
    let (mut same, mut binding, n) = (0, 0, 200);
    for _ in 0..n {
        // Starts mostly inside the limits (clamping larger turns puts bones on their bounds,
        // where nearly any move binds) and with no straight joint (one with a preferred bend
        // would be nudged first), targets anywhere the limits allow.
        let bent = |p: &Pose| (1..rig.len()).all(|k| ((rig.bone(k).rest_rotation * p.rotations[k]) * DVec3::Y).y < (2e-3f64).cos());
        let mut start = std::iter::repeat_with(|| in_limit_pose(0.3)).find(bent).unwrap();
        // Half the quaternions given with w < 0 (the same rotations), as a DCC may hand them.
        for q in start.rotations.iter_mut().step_by(2) {
            *q = -*q;
        }
        let target = rig.forward(&in_limit_pose(1.2)).tails[9];
        let (mut limited, mut unlimited) = (lp.problem.clone(), free.clone());
        limited.set_target(0, target).unwrap();
        unlimited.set_target(0, target).unwrap();
        let sol = solve_checked(&limited, lp.settings, &start);
        assert!(sol.reached, "{:?} after {} iterations", sol.stop, sol.iterations);
        // Keyable: every quaternion in its start's hemisphere, whichever path solved it.
        assert!(sol.pose.rotations.iter().zip(&start.rotations).all(|(q, s)| q.dot(*s) >= 0.0), "a rotation flipped hemisphere");
        let alg1 = Fabrik::new(lp.settings).solve(&unlimited, &start).unwrap();
        // (The unbound attempt gives up after 10 iterations, `UNBOUND_ITERATIONS`.)
        if alg1.iterations <= 10 && rig.bones().iter().zip(&alg1.pose.rotations).all(|(b, &q)| b.limit.contains(q)) {
            assert_eq!(sol.pose, alg1.pose, "limits that do not bind changed the answer ({:?} {} vs {:?} {}, by {:e} rad)", sol.stop, sol.iterations, alg1.stop, alg1.iterations, sol.pose.max_angle_to(&alg1.pose));
            assert_eq!(sol.iterations, alg1.iterations);
            same += 1;
        } else {
            binding += 1;
        }
    }
    eprintln!("chain10 constrained from in-limit starts: {same}/{n} answers are the free chain's, {binding} bind a limit");
    assert!(same >= n / 2 && binding > 0, "{same} unbound, {binding} binding: the test no longer covers both");
}

/// Tracking on the chain, free and constrained: the tip of a smooth motion (inside the limits,
/// 60 fps), each frame warm-started. Every frame is reached and no bone turns far in a frame.
/// Observed over 1000 frames: largest turn 0.0111 rad free and 0.0093 rad constrained (the
/// motion's own: 0.0154), 1.8 and 2.5 iterations a frame. Tracking moves take the least joint
/// motion (Gauss–Newton steps on the free chain; damped least squares on the constrained one).
/// Before, FABRIK's first iteration placed the free chain anew each frame and turned bones up
/// to 0.19 rad in a frame, and solving the constrained chain's moves as free ones first (then
/// clamping where limits bind) up to 0.17 rad.
#[test]
fn chain10_tracks_a_smooth_motion_without_pops() {
    for file in ["paper_chain10.json", "paper_chain10_constrained.json"] {
        let lp = load(file);
        let rig = lp.problem.rig();
        let mut solver = Fabrik::new(lp.settings);
        let mut pose = lp.pose.clone();
        let mut largest = 0.0f64;
        for (f, truth) in synth_motion(rig, 1, 300, 60.0).iter().enumerate() {
            let mut p = lp.problem.clone();
            p.set_target(0, rig.forward(truth).tails[9]).unwrap();
            let sol = solver.solve(&p, &pose).unwrap();
            assert!(sol.reached, "{file}, frame {f}: {:?} after {} iterations", sol.stop, sol.iterations);
            if f > 0 {
                largest = largest.max(sol.pose.max_angle_to(&pose));
            }
            pose = sol.pose;
        }
        assert!(largest < 0.05, "{file}: a bone turned {largest} rad in one frame");
    }
}

/// Tracking on the humanoid: the four effectors of a smooth motion inside the constrained
/// humanoid's limits (sums of sinusoids per joint; 200 frames at 60 fps), so every frame is
/// reachable; each frame warm-started from the last. Every frame is reached, within limits for
/// the constrained model, with small per-frame motion (no flips).
#[test]
fn humanoid13_tracks_smoothly_moving_targets() {
    track_humanoid("paper_humanoid13.json");
}

#[test]
fn humanoid13_constrained_tracks_smoothly_moving_targets() {
    track_humanoid("paper_humanoid13_constrained.json");
}

fn track_humanoid(name: &str) {
    let lp = load(name);
    let tracks = common::humanoid_tracks(200, 60.0, 7);
    let mut p = lp.problem.clone();
    let mut solver = Fabrik::new(lp.settings);
    let mut pose = lp.pose.clone();
    let mut poses = Vec::new();
    let mut iterations = Vec::new();
    let mut max_turn: f64 = 0.0;
    for (frame, targets) in tracks.iter().enumerate() {
        for (gi, t) in targets.iter().enumerate() {
            p.set_target(gi, *t).unwrap();
        }
        let sol = solver.solve(&p, &pose).unwrap();
        if let Err(e) = check_solution(&p, &pose, &sol, lp.settings.tolerance, 1e-9) {
            panic!("{name}: frame {frame}: {e}");
        }
        assert!(
            sol.reached,
            "{name}: frame {frame} not reached: {:?} after {} iterations ({:?})",
            sol.residuals, sol.iterations, sol.stop
        );
        iterations.push(f64::from(sol.iterations));
        // Frame 0 catches up from the rest pose; smoothness counts from frame 1.
        if frame > 0 {
            max_turn = max_turn.max(sol.pose.max_angle_to(&pose));
        }
        pose = sol.pose;
        poses.push(pose.clone());
    }
    let jitter = common::jitter(&poses);
    eprintln!(
        "{name}: {:.2} mean / {} max iterations per frame, jitter {:.2e} rad, largest per-frame turn {max_turn:.3} rad",
        mean(&iterations),
        iterations.iter().copied().fold(0.0, f64::max),
        jitter
    );
    // Observed at 5197955 (unconstrained): 4.7 mean / 38 max iterations per frame, jitter 1.5e-2
    // rad, largest per-frame turn < 0.3 rad. The bounds are what a smooth 60 fps track should meet.
    assert!(mean(&iterations) <= 30.0, "{name}: {} iterations per frame", mean(&iterations));
    assert!(max_turn < 0.3, "{name}: a bone turned {max_turn} rad in one frame");
}

/// The largest turn of any bone between consecutive frames of the humanoid in `file` tracking
/// the benchmark's 1000 frames (every frame warm-started from the one before), and the frames
/// where some bone turns more than 0.1 rad.
fn humanoid13_largest_turn(file: &str) -> (f64, Vec<(usize, f64)>) {
    let lp = load(file);
    let tracks = common::humanoid_tracks(1000, 60.0, 7);
    let mut p = lp.problem.clone();
    let mut solver = Fabrik::new(lp.settings);
    let mut pose = lp.pose.clone();
    let mut pops = Vec::new();
    let mut largest = 0.0f64;
    for (frame, targets) in tracks.iter().enumerate() {
        for (gi, t) in targets.iter().enumerate() {
            p.set_target(gi, *t).unwrap();
        }
        let sol = solver.solve(&p, &pose).unwrap();
        assert!(sol.reached, "frame {frame}: {:?}", sol.residuals);
        let turn = sol.pose.max_angle_to(&pose);
        if frame > 0 {
            largest = largest.max(turn);
            if turn > 0.1 {
                pops.push((frame, turn));
            }
        }
        pose = sol.pose;
    }
    (largest, pops)
}

/// Frame 653 of that track turned the chest 0.317 rad and a clavicle 0.473 rad in one frame: the
/// right arm's target passed 1.8 mm beyond its reach from the clavicle, and the chest (a
/// sub-base) turned alone to make it up, though the target lay almost along its lever arm. The
/// sub-base's damped turn (`SUB_BASE_DAMPING`) leaves that to the spine: 0.214 rad is now the
/// largest turn of the whole track (an arm's swivel, frame 639).
#[test]
fn humanoid13_tracking_never_turns_a_bone_a_quarter_radian() {
    let (largest, pops) = humanoid13_largest_turn("paper_humanoid13.json");
    assert!(largest < 0.25, "{largest} rad; frames over 0.1 rad: {pops:?}");
}

/// Both humanoids over the benchmark's 1000 frames of the same motion, where the motion itself
/// never turns a bone more than 0.033 rad per frame. FABRIK alone reached every frame but popped:
/// unconstrained, 11 frames turned some bone more than 0.1 rad (an arm's swivel about its
/// shoulder-wrist line drifts free of the goals; up to 0.235 rad); constrained, its limit
/// steering flipped an upper arm by 3.1 rad. Tracking frames are now solved by the least joint
/// motion (the damped-least-squares step from the warm start), and no bone turns over 0.1 rad.
#[test]
fn humanoids_track_1000_frames_without_pops() {
    for file in ["paper_humanoid13.json", "paper_humanoid13_constrained.json"] {
        let (_, pops) = humanoid13_largest_turn(file);
        assert!(pops.is_empty(), "{file}: {} frames turn a bone > 0.1 rad: {pops:?}", pops.len());
    }
}

/// The first frame of the tracking motion on its own: the four targets are FK of a pose inside
/// the constrained humanoid's limits (so reachable within them), solved from rest. FABRIK alone
/// met three goals exactly and stalled with the right wrist 33.7 mm short after 12 iterations:
/// the torso settled where the legs and the left arm wanted it and the right arm's limits could
/// not make up the rest (frames 0–70 of `humanoid13_constrained_tracks_smoothly_moving_targets`
/// stalled so). The damped-least-squares finish moves every bone at once and reaches it.
#[test]
fn humanoid13_constrained_reaches_an_in_limit_pose() {
    let lp = load("paper_humanoid13_constrained.json");
    let mut p = lp.problem.clone();
    let targets = [
        DVec3::new(116.90267923454238, -426.51935017340514, 1087.649045227031),
        DVec3::new(-476.7508706482582, -281.36413554966316, 993.9031296177772),
        DVec3::new(176.97952794802737, 86.06365120706158, 611.4420919197207),
        DVec3::new(210.03865346582802, -596.552692620872, 428.77024729281663),
    ];
    // They are the effectors of `synth_motion(rig, 7, 1, 60.0)[0]`, a pose inside the limits.
    let truth = &synth_motion(p.rig(), 7, 1, 60.0)[0];
    let f = p.rig().forward(truth);
    for (gi, t) in targets.iter().enumerate() {
        assert!((f.tails[p.goals()[gi].bone] - *t).length() < 1e-6);
        p.set_target(gi, *t).unwrap();
    }
    assert!(common::max_violation(p.rig(), truth).0 < 1e-9);
    let sol = solve_checked(&p, lp.settings, &lp.pose);
    assert!(sol.reached, "{} iterations ({:?}), residuals {:?} mm", sol.iterations, sol.stop, sol.residuals);
}

/// §4.3.2: reconstructing motion from the end effectors alone, the constrained solver's joint
/// positions are closer to the truth than the unconstrained solver's (the report: ~30 mm vs
/// ~59 mm). Motion: smooth random joint-angle trajectories inside the constrained humanoid's
/// limits, 240 frames at 30 fps; targets are FK of the true pose; both solvers warm-start.
#[test]
fn constrained_reconstruction_beats_unconstrained() {
    let lp = load("paper_humanoid13_constrained.json");
    let constrained = lp.problem.clone();
    let mut free =
        Problem::new(without_limits(constrained.rig()), constrained.goals().to_vec(), constrained.root()).unwrap();
    free.set_reference(constrained.reference().clone()).unwrap();
    let mut errors = (Vec::new(), Vec::new());
    for seed in 1..=3 {
        let truth = synth_motion(constrained.rig(), seed, 240, 30.0);
        let c = reconstruct(&constrained, &truth, lp.settings);
        let u = reconstruct(&free, &truth, lp.settings);
        eprintln!(
            "seed {seed}: constrained {:.1} mm ({}/{} frames reached, {:.1} it), unconstrained {:.1} mm ({}/{}, {:.1} it)",
            c.mean_joint_error,
            c.frames_reached,
            c.frames,
            c.mean_iterations,
            u.mean_joint_error,
            u.frames_reached,
            u.frames,
            u.mean_iterations
        );
        errors.0.push(c.mean_joint_error);
        errors.1.push(u.mean_joint_error);
    }
    // Observed at 5197955: constrained 70.2 / 67.0 / 61.0 mm (150–186 of 240 frames reached),
    // unconstrained 119.6 / 98.0 / 85.4 mm (all reached).
    let (c, u) = (mean(&errors.0), mean(&errors.1));
    assert!(c < u, "constrained {c:.1} mm should beat unconstrained {u:.1} mm");
}

/// §4.3.2 with the report's marker set: the trunk measured (a goal at the chest's tail, the
/// neck's base) besides the wrists and ankles, the limbs' inner joints deleted and solved (TR-632
/// §4.3.1: "selected internal joints have been artificially deleted"). The report's figures: just
/// over 30 mm constrained, "almost half" the unconstrained error. From the four effectors alone
/// (the test above) the trunk's nine degrees of freedom are unobserved and the error is about
/// 70 mm. Here the constrained error is at most 45 mm (issue #13's target) and below the
/// unconstrained one, with the chest's point alone and with its rotation too, for `fabrik` and
/// `dls`; for `fabrik`, the report's method, under 0.6 of it (`dls` unconstrained lands nearer the
/// truth than `fabrik` unconstrained: its steps turn the bones least).
#[test]
fn reconstruction_with_the_trunk_marked_is_within_45_mm() {
    let lp = load("paper_humanoid13_constrained.json");
    for orientation in [false, true] {
        let constrained = common::with_trunk_marker(&lp.problem, orientation);
        let mut free = Problem::new(without_limits(constrained.rig()), constrained.goals().to_vec(), constrained.root()).unwrap();
        free.set_reference(constrained.reference().clone()).unwrap();
        for method in [Method::Fabrik, Method::Dls] {
            let (mut c, mut u) = (Vec::new(), Vec::new());
            for seed in 1..=3 {
                let truth = synth_motion(constrained.rig(), seed, 240, 30.0);
                c.push(common::reconstruct_with(method, &constrained, &truth, lp.settings).mean_joint_error);
                u.push(common::reconstruct_with(method, &free, &truth, lp.settings).mean_joint_error);
            }
            let (c, u) = (mean(&c), mean(&u));
            eprintln!("{} with the chest's point{}: constrained {c:.1} mm, unconstrained {u:.1} mm", method.name(), if orientation { " and rotation" } else { "" });
            let ratio = if method == Method::Fabrik { 0.6 } else { 1.0 };
            assert!(c <= 45.0 && c < ratio * u, "{}: constrained {c:.1} mm, unconstrained {u:.1} mm", method.name());
        }
    }
}

/// Goals of the same models can be moved and re-solved: moving every target by 3.7 mm converges
/// in few iterations from the previous solution (the warm start the tracking case relies on).
macro_rules! small_move {
    ($($(#[$attr:meta])* $test:ident: $file:literal;)*) => {$(
        #[test]
        $(#[$attr])*
        fn $test() {
            small_move_converges($file);
        }
    )*};
}

small_move! {
    chain10_follows_a_small_move: "paper_chain10.json";
    chain10_constrained_follows_a_small_move: "paper_chain10_constrained.json";
    /// Fixed by 91a4de0/5197955 (was ignored as a core bug).
    y_shape_follows_a_small_move: "paper_y_shape.json";
    hand_follows_a_small_move: "paper_hand.json";
    /// Fixed by 91a4de0/5197955 (was ignored as a core bug).
    humanoid13_follows_a_small_move: "paper_humanoid13.json";
    humanoid13_constrained_follows_a_small_move: "paper_humanoid13_constrained.json";
}

fn small_move_converges(name: &str) {
    {
        let (lp, sol) = solve_file(name);
        let mut p = lp.problem.clone();
        let goals: Vec<Goal> = p.goals().to_vec();
        for (gi, g) in goals.iter().enumerate() {
            p.set_target(gi, g.target + DVec3::new(3.0, -2.0, 1.0)).unwrap();
        }
        let again = solve_checked(&p, lp.settings, &sol.pose);
        eprintln!("{name}: 3.7 mm move, {} iterations, reached {}", again.iterations, again.reached);
        // Observed at c8d5d11: 1–16 iterations where it passes.
        assert!(again.reached, "{name}: {:?}", again.residuals);
        assert!(again.iterations <= 60, "{name}: {} iterations", again.iterations);
    }
}
