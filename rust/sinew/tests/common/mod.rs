//! Helpers shared by the integration tests and the benchmark (`benches/fabrik.rs` includes this
//! file with `#[path]`): a seeded RNG, an independent forward kinematics, the invariant checks
//! every solve must pass, the paper models, and the reconstruction experiment of §4.3.2.

#![allow(dead_code)]

use std::path::PathBuf;

use glam::{DQuat, DVec3};
use sinew::geometry::from_rotation_vector;
use sinew::{ConeLimit, Goal, HingeLimit, JointLimit, LoadedProblem, Method, Pose, Problem, Rig, Solution, SolveSettings, Solver, Swing, TwistLimit};

/// SplitMix64: tiny, seeded, and the same on every platform.
#[derive(Debug, Clone)]
pub struct Rng(u64);

impl Rng {
    pub fn new(seed: u64) -> Self {
        Self(seed ^ 0x9E37_79B9_7F4A_7C15)
    }

    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// Uniform in [0, 1).
    pub fn f64(&mut self) -> f64 {
        (self.next_u64() >> 11) as f64 / (1u64 << 53) as f64
    }

    pub fn range(&mut self, lo: f64, hi: f64) -> f64 {
        lo + (hi - lo) * self.f64()
    }

    /// Uniform on the unit sphere.
    pub fn unit(&mut self) -> DVec3 {
        loop {
            let v = DVec3::new(self.range(-1.0, 1.0), self.range(-1.0, 1.0), self.range(-1.0, 1.0));
            let l = v.length_squared();
            if l > 1e-6 && l <= 1.0 {
                return v / l.sqrt();
            }
        }
    }

    /// Uniform in the ball of radius `r`.
    pub fn in_ball(&mut self, r: f64) -> DVec3 {
        loop {
            let v = DVec3::new(self.range(-1.0, 1.0), self.range(-1.0, 1.0), self.range(-1.0, 1.0));
            if v.length_squared() <= 1.0 {
                return v * r;
            }
        }
    }

    /// A rotation of up to `max_angle` radians about a uniform axis.
    pub fn rotation(&mut self, max_angle: f64) -> DQuat {
        let axis = self.unit();
        DQuat::from_axis_angle(axis, self.range(0.0, max_angle))
    }
}

// ---------------------------------------------------------------------------------------------
// Paper models

/// `tests/data/<name>` at the repository root.
pub fn data_path(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../tests/data").join(name)
}

pub fn load(name: &str) -> LoadedProblem {
    let path = data_path(name);
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    Problem::from_json(&text).unwrap_or_else(|e| panic!("{name}: {e}"))
}

/// A straight chain of `n` connected unit bones `b0`, `b1`, … up +Y from the origin, each with
/// `limit`.
pub fn straight_chain(n: usize, limit: JointLimit) -> Rig {
    Rig::new(
        (0..n)
            .map(|i| sinew::Bone {
                name: format!("b{i}"),
                parent: i.checked_sub(1),
                rest_head: if i == 0 { DVec3::ZERO } else { DVec3::Y },
                rest_rotation: DQuat::IDENTITY,
                length: 1.0,
                limit,
            })
            .collect(),
    )
    .unwrap()
}

/// The same rig with every limit removed.
pub fn without_limits(rig: &Rig) -> Rig {
    let mut r = rig.clone();
    for i in 0..r.len() {
        r.set_limit(i, JointLimit::FREE).unwrap();
    }
    r
}

/// The same problem with other goals (same root mode and reference).
pub fn with_goals(p: &Problem, rig: Rig, goals: Vec<Goal>) -> Problem {
    let mut out = Problem::new(rig, goals, p.root()).unwrap();
    out.set_reference(p.reference().clone()).unwrap();
    out
}

// ---------------------------------------------------------------------------------------------
// Independent forward kinematics and the invariants

/// World frames recomputed from the pose, written out here rather than taken from `Rig::forward`,
/// and without normalising anything: a non-unit quaternion in a pose shows up as a wrong length.
#[derive(Debug, Clone)]
pub struct Fk {
    pub heads: Vec<DVec3>,
    pub tails: Vec<DVec3>,
    pub rotations: Vec<DQuat>,
}

/// Rotates `v` by `q` as the sandwich product `q v q*` (scales by |q|² when `q` is not unit).
pub fn sandwich(q: DQuat, v: DVec3) -> DVec3 {
    let p = q * DQuat::from_xyzw(v.x, v.y, v.z, 0.0) * q.conjugate();
    DVec3::new(p.x, p.y, p.z)
}

/// Forward kinematics written independently of the library's: a bone's head sits at its rest
/// offset scaled by its parent's length scale, its tail at its length times its own.
pub fn fk(rig: &Rig, pose: &Pose) -> Fk {
    let n = rig.len();
    let mut f = Fk { heads: vec![DVec3::ZERO; n], tails: vec![DVec3::ZERO; n], rotations: vec![DQuat::IDENTITY; n] };
    let scale = |i: usize| if pose.scales.is_empty() { 1.0 } else { pose.scales[i] };
    for (i, b) in rig.bones().iter().enumerate() {
        let local = pose.rotations[i];
        let (rot, head) = match b.parent {
            Some(p) => (f.rotations[p] * b.rest_rotation * local, f.heads[p] + sandwich(f.rotations[p], b.rest_head * scale(p))),
            None if i == 0 => (b.rest_rotation * local, b.rest_head + sandwich(b.rest_rotation, pose.root_translation)),
            None => (b.rest_rotation * local, b.rest_head),
        };
        f.rotations[i] = rot;
        f.heads[i] = head;
        f.tails[i] = head + sandwich(rot, DVec3::new(0.0, b.length * scale(i), 0.0));
    }
    f
}

/// Largest limit violation (radians) over every bone; 0 when no limit is violated.
pub fn max_violation(rig: &Rig, pose: &Pose) -> (f64, usize) {
    let mut worst = (0.0, 0);
    for (i, b) in rig.bones().iter().enumerate() {
        let v = b.limit.violation(pose.rotations[i]);
        if v > worst.0 {
            worst = (v, i);
        }
    }
    worst
}

/// Everything a returned pose must satisfy, whatever the goals: finite unit quaternions, bone
/// lengths and rest offsets kept by FK, limits respected, residuals equal to the recomputed
/// distances. Returns a description of the first failure.
pub fn check_solution(
    problem: &Problem,
    start: &Pose,
    sol: &Solution,
    tolerance: f64,
    tol_len: f64,
) -> Result<(), String> {
    let rig = problem.rig();
    let pose = &sol.pose;
    if pose.rotations.len() != rig.len() {
        return Err(format!("pose has {} rotations for {} bones", pose.rotations.len(), rig.len()));
    }
    if !pose.root_translation.is_finite() {
        return Err(format!("root translation {:?}", pose.root_translation));
    }
    for (i, q) in pose.rotations.iter().enumerate() {
        if !q.is_finite() {
            return Err(format!("bone {i}: rotation {q:?} is not finite"));
        }
        if (q.length() - 1.0).abs() > 1e-9 {
            return Err(format!("bone {i}: rotation {q:?} is not unit ({})", q.length()));
        }
    }
    for r in &sol.residuals {
        if !r.is_finite() {
            return Err(format!("residual {r}"));
        }
    }
    // Length scales: none, or one per bone; 1 exactly for a bone that does not stretch, within
    // the bounds for one that does.
    if !(pose.scales.is_empty() || pose.scales.len() == rig.len()) {
        return Err(format!("pose has {} length scales for {} bones", pose.scales.len(), rig.len()));
    }
    for (i, &s) in pose.scales.iter().enumerate() {
        let stretch = rig.bone(i).limit.stretch;
        if (stretch == 0.0 && s != 1.0) || !(sinew::MIN_SCALE..=sinew::MAX_SCALE).contains(&s) {
            return Err(format!("bone {i}: length scale {s} (stretch {stretch})"));
        }
    }
    let scale = |i: usize| if pose.scales.is_empty() { 1.0 } else { pose.scales[i] };
    let f = fk(rig, pose);
    for (i, b) in rig.bones().iter().enumerate() {
        let len = (f.tails[i] - f.heads[i]).length();
        let want = b.length * scale(i);
        if (len - want).abs() > tol_len * want.max(1.0) {
            return Err(format!("bone {i}: length {len} vs {want}"));
        }
        if let Some(p) = b.parent {
            // The child's head in its parent's (unit) frame is the rest offset, scaled by the
            // parent's length scale.
            let pr = f.rotations[p].normalize();
            let off = pr.conjugate() * (f.heads[i] - f.heads[p]);
            let want = b.rest_head * scale(p);
            if (off - want).length() > tol_len * want.length().max(1.0) {
                return Err(format!("bone {i}: offset {off:?} vs rest {want:?}"));
            }
        }
    }
    let (v, at) = max_violation(rig, pose);
    if v > 1e-9 {
        return Err(format!(
            "bone {at} violates its limit by {v:e} rad: local {:?}, limit {:?}",
            pose.rotations[at],
            rig.bone(at).limit
        ));
    }
    for (i, b) in rig.bones().iter().enumerate() {
        if b.limit.locked && sinew::geometry::angle_between(pose.rotations[i], start.rotations[i]) > 1e-9 {
            return Err(format!("locked bone {i} moved"));
        }
    }
    if sol.residuals.len() != problem.goals().len() {
        return Err(format!("{} residuals for {} goals", sol.residuals.len(), problem.goals().len()));
    }
    for (gi, g) in problem.goals().iter().enumerate() {
        let e = if g.use_tail { f.tails[g.bone] } else { f.heads[g.bone] };
        let d = (e - g.target).length();
        let scale = g.target.length().max(1.0);
        if (d - sol.residuals[gi]).abs() > 1e-9 * scale {
            return Err(format!("goal {gi}: reported residual {} but FK gives {d}", sol.residuals[gi]));
        }
    }
    // The residuals are those of the returned pose as the library's own forward kinematics
    // computes them, to the last bit.
    let lib = rig.forward(pose);
    for (gi, g) in problem.goals().iter().enumerate() {
        let d = (lib.effector(g.bone, g.use_tail) - g.target).length();
        if d.to_bits() != sol.residuals[gi].to_bits() {
            return Err(format!("goal {gi}: reported residual {:e} but Rig::forward gives {d:e}", sol.residuals[gi]));
        }
    }
    // Reached: every goal's distance within the tolerance, and its orientation within the
    // tolerance over its chain's reach (`Problem::goal_met`).
    let met = (0..problem.goals().len()).all(|gi| problem.goal_met(gi, &lib, tolerance));
    if sol.reached != met || (met && !sol.residuals.iter().all(|&r| r <= tolerance)) {
        return Err(format!("reached = {} but residuals {:?} / {:?} vs tolerance {tolerance}", sol.reached, sol.residuals, sol.orientation_residuals));
    }
    for (gi, &angle) in sol.orientation_residuals.iter().enumerate() {
        if (angle - problem.goal_errors(gi, &lib).1).abs() > 1e-12 {
            return Err(format!("goal {gi}: reported orientation residual {angle:e} but FK gives {:e}", problem.goal_errors(gi, &lib).1));
        }
    }
    Ok(())
}

/// Solving again from `sol.pose` must be a fixed point: at most one iteration and the same pose.
pub fn check_fixed_point(
    solver: &mut dyn Solver,
    problem: &Problem,
    sol: &Solution,
    tol_angle: f64,
) -> Result<Solution, String> {
    // (Solving again converges to the same pose; the steps toward the reference may take a few
    // iterations to confirm it.)
    let again = solver.solve(problem, &sol.pose).map_err(|e| e.to_string())?;
    let d = again.pose.max_angle_to(&sol.pose);
    let dt = (again.pose.root_translation - sol.pose.root_translation).length();
    if d > tol_angle || dt > tol_angle * 1e3 {
        return Err(format!(
            "re-solve moved the pose by {d:e} rad / {dt:e} (stop {:?}, {} iterations)",
            again.stop, again.iterations
        ));
    }
    Ok(again)
}

/// Every joint point of a rig (each head, and each tail no child's head sits on).
pub fn joint_points(rig: &Rig, heads: &[DVec3], tails: &[DVec3]) -> Vec<DVec3> {
    let mut pts: Vec<DVec3> = heads.to_vec();
    for (i, _) in rig.bones().iter().enumerate() {
        let connected = rig
            .children(i)
            .iter()
            .any(|&c| (rig.bone(c).rest_head - DVec3::new(0.0, rig.bone(i).length, 0.0)).length() < 1e-9);
        if !connected {
            pts.push(tails[i]);
        }
    }
    pts
}

// ---------------------------------------------------------------------------------------------
// Motion: smooth trajectories inside the limits (§4.3.2's reconstruction set-up)

/// A smooth random local-rotation trajectory for one bone: a sum of two sinusoids per rotation-
/// vector component, scaled to the bone's limit and clamped into it.
#[derive(Debug, Clone)]
pub struct Trajectory {
    amp: [[f64; 2]; 3],
    freq: [[f64; 2]; 3],
    phase: [[f64; 2]; 3],
    centre: DVec3,
}

impl Trajectory {
    pub fn random(rng: &mut Rng, limit: &JointLimit) -> Self {
        let mut amp = [[0.0; 2]; 3];
        let mut freq = [[0.0; 2]; 3];
        let mut phase = [[0.0; 2]; 3];
        // Amplitudes per rotation-vector axis (x, y = twist, z).
        let (ax, ay, az, centre) = match limit.swing {
            Swing::Hinge(h) => {
                let mid = 0.5 * (h.min + h.max);
                let half = 0.5 * (h.max - h.min);
                (half, 0.0, 0.0, h.axis * mid)
            }
            Swing::Cone(c) => {
                let tw = limit.twist.map_or(0.5, |t| 0.5 * (t.max - t.min));
                let cx = 0.5 * (c.x_pos - c.x_neg);
                let cz = 0.5 * (c.z_pos - c.z_neg);
                (0.5 * (c.x_pos + c.x_neg), tw, 0.5 * (c.z_pos + c.z_neg), DVec3::new(cx, 0.0, cz))
            }
            Swing::Free => (0.6, 0.4, 0.6, DVec3::ZERO),
        };
        for (k, a) in [ax, ay, az].into_iter().enumerate() {
            for j in 0..2 {
                amp[k][j] = a * rng.range(0.25, 0.45);
                freq[k][j] = rng.range(0.2, 1.2) * (j + 1) as f64;
                phase[k][j] = rng.range(0.0, std::f64::consts::TAU);
            }
        }
        Self { amp, freq, phase, centre }
    }

    /// The rotation at time `t` (seconds), inside `limit`.
    pub fn at(&self, t: f64, limit: &JointLimit) -> DQuat {
        let mut r = self.centre;
        for k in 0..3 {
            let mut v = 0.0;
            for j in 0..2 {
                v += self.amp[k][j] * (self.freq[k][j] * t + self.phase[k][j]).sin();
            }
            r[k] += v;
        }
        let q = match limit.swing {
            Swing::Hinge(h) => DQuat::from_axis_angle(h.axis, h.axis.dot(r)),
            _ => from_rotation_vector(DVec3::new(r.x, 0.0, r.z)) * DQuat::from_rotation_y(r.y),
        };
        limit.clamp(q)
    }
}

/// Ground-truth poses of a motion clip on `rig` (root pinned), `frames` frames at `fps`.
pub fn synth_motion(rig: &Rig, seed: u64, frames: usize, fps: f64) -> Vec<Pose> {
    let mut rng = Rng::new(seed);
    let traj: Vec<Trajectory> = rig.bones().iter().map(|b| Trajectory::random(&mut rng, &b.limit)).collect();
    (0..frames)
        .map(|f| {
            let t = f as f64 / fps;
            Pose {
                rotations: rig.bones().iter().zip(&traj).map(|(b, tr)| tr.at(t, &b.limit)).collect(),
                root_translation: DVec3::ZERO,
                scales: Vec::new(),
            }
        })
        .collect()
}

/// Result of reconstructing a clip from its effectors only.
#[derive(Debug, Clone, Default)]
pub struct Reconstruction {
    /// Mean distance (rig units) between solved and true joint points, over frames and joints.
    pub mean_joint_error: f64,
    pub mean_iterations: f64,
    pub frames_reached: usize,
    pub frames: usize,
}

/// Tracks the effectors of `truth` (the problem's goals' bones, and their rotations for goals
/// with an orientation) frame by frame, warm-started, and compares every joint position with the
/// ground truth.
pub fn reconstruct(problem: &Problem, truth: &[Pose], settings: SolveSettings) -> Reconstruction {
    reconstruct_with(Method::Fabrik, problem, truth, settings)
}

/// The paper humanoid's problem with the trunk marked as well as the wrists and ankles: a goal at
/// the chest's tail (the neck's base), with the chest's rotation too if `orientation` (what a
/// cluster of torso markers gives). The report's §4.3.2 reconstructs optical motion capture with
/// "selected internal joints artificially deleted" (TR-632 §4.3.1): the limbs' inner joints
/// (shoulders, elbows, hips, knees) are solved, the trunk is measured.
pub fn with_trunk_marker(problem: &Problem, orientation: bool) -> Problem {
    let rig = problem.rig();
    let chest = rig.bones().iter().position(|b| b.name == "chest").expect("the paper humanoid has a chest");
    let mut goal = Goal::new(chest, rig.forward(&Pose::rest(rig.len())).tails[chest]).with_chain_length(0);
    if orientation {
        goal = goal.with_orientation(DQuat::IDENTITY);
    }
    let mut goals = problem.goals().to_vec();
    goals.push(goal);
    let mut p = Problem::new(rig.clone(), goals, problem.root()).unwrap();
    p.set_reference(problem.reference().clone()).unwrap();
    p
}

/// [`reconstruct`] with the solver of `method`.
pub fn reconstruct_with(method: Method, problem: &Problem, truth: &[Pose], settings: SolveSettings) -> Reconstruction {
    let rig = problem.rig();
    let mut p = problem.clone();
    let mut solver = method.solver(settings).unwrap();
    let mut pose = Pose::rest(rig.len());
    let mut err = 0.0;
    let mut count = 0usize;
    let mut iters = 0u64;
    let mut reached = 0;
    for gt in truth {
        let f = rig.forward(gt);
        for (gi, g) in problem.goals().iter().enumerate() {
            p.set_target(gi, f.effector(g.bone, g.use_tail)).unwrap();
            if g.orientation.is_some() {
                p.set_orientation(gi, Some(f.rotations[g.bone])).unwrap();
            }
        }
        let sol = solver.solve(&p, &pose).unwrap();
        iters += u64::from(sol.iterations);
        reached += usize::from(sol.reached);
        let s = rig.forward(&sol.pose);
        let a = joint_points(rig, &s.heads, &s.tails);
        let b = joint_points(rig, &f.heads, &f.tails);
        for (x, y) in a.iter().zip(&b) {
            err += (*x - *y).length();
            count += 1;
        }
        pose = sol.pose;
    }
    Reconstruction {
        mean_joint_error: err / count as f64,
        mean_iterations: iters as f64 / truth.len() as f64,
        frames_reached: reached,
        frames: truth.len(),
    }
}

/// Smoothly moving, reachable targets for the humanoid's four effectors (wrists, ankles): the
/// effectors of a smooth random motion inside the constrained humanoid's limits (`synth_motion`
/// at `fps`), so every frame is reachable by both humanoid files (same rig, same goals). Per
/// frame, one target per goal of `paper_humanoid13_constrained.json`.
pub fn humanoid_tracks(frames: usize, fps: f64, seed: u64) -> Vec<Vec<DVec3>> {
    let lp = load("paper_humanoid13_constrained.json");
    let rig = lp.problem.rig();
    synth_motion(rig, seed, frames, fps)
        .iter()
        .map(|pose| {
            let f = rig.forward(pose);
            lp.problem.goals().iter().map(|g| f.effector(g.bone, g.use_tail)).collect()
        })
        .collect()
}

/// Mean angle (radians) each bone turns between consecutive poses.
pub fn jitter(poses: &[Pose]) -> f64 {
    let mut sum = 0.0;
    let mut n = 0usize;
    for w in poses.windows(2) {
        for (a, b) in w[0].rotations.iter().zip(&w[1].rotations) {
            sum += sinew::geometry::angle_between(*a, *b);
            n += 1;
        }
    }
    if n == 0 { 0.0 } else { sum / n as f64 }
}

pub fn median(v: &mut [f64]) -> f64 {
    if v.is_empty() {
        return f64::NAN;
    }
    v.sort_by(f64::total_cmp);
    let m = v.len() / 2;
    if v.len() % 2 == 1 { v[m] } else { 0.5 * (v[m - 1] + v[m]) }
}

pub fn mean(v: &[f64]) -> f64 {
    v.iter().sum::<f64>() / v.len() as f64
}

// ---------------------------------------------------------------------------------------------
// Random limits, as the property suites (`properties.rs`, `method_properties.rs`) generate them

/// A generated swing bound.
#[derive(Debug, Clone)]
pub enum SwingSpec {
    Free,
    /// The cone's `x_pos, x_neg, z_pos, z_neg`.
    Cone([f64; 4]),
    /// Axis, min, max.
    Hinge(DVec3, f64, f64),
}

/// A generated joint limit.
#[derive(Debug, Clone)]
pub struct LimitSpec {
    pub swing: SwingSpec,
    pub twist: Option<(f64, f64)>,
    pub locked: bool,
    pub stiffness: f64,
}

impl LimitSpec {
    /// The core's limit.
    pub fn limit(&self) -> JointLimit {
        JointLimit {
            swing: match self.swing {
                SwingSpec::Free => Swing::Free,
                SwingSpec::Cone([a, b, c, d]) => Swing::Cone(ConeLimit::new(a, b, c, d)),
                SwingSpec::Hinge(axis, min, max) => Swing::Hinge(HingeLimit { axis, min, max }),
            },
            // (A hinge takes no twist range.)
            twist: if matches!(self.swing, SwingSpec::Hinge(..)) { None } else { self.twist.map(|(min, max)| TwistLimit { min, max }) },
            locked: self.locked,
            stiffness: self.stiffness,
            // Above 0.5, per axis: as stiff about X, half as stiff about Y, free about Z.
            stiffness_axes: (self.stiffness > 0.5).then_some([self.stiffness, 0.5 * self.stiffness, 0.0]),
            stretch: 0.0,
        }
    }
}
