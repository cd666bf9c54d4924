//! Joint-space damped least squares steps (the Jacobian family; Nilsson's thesis §2.4.3 and
//! Buss 2004, "DLS") on the same [`Problem`] as every solver: the [`super::Dls`] solver runs
//! them from the start pose, and [`super::Fabrik`] hands over to them for small tracking moves
//! and when its point steps stall or crawl short of goals that limits and sub-bases make hard.
//!
//! The unknowns are small turns of every bone some goal moves: three world axes about the bone's
//! head (one, the hinge axis, for a hinge; none for a locked bone), each scaled by
//! `1 − stiffness`, plus the root's translation when it is free. The residual stacks, per goal,
//! `√weight · (target − effector)` and, for an orientation goal, `√weight · reach ·` the rotation
//! vector from the effector's frame to the target frame (`reach` is the goal chain's length, so
//! a radian counts as far as the chain reaches), and for a pole on a chain that shares bones with
//! other goals, `√weight · reach ·` its swivel from the pole ([`pole_swivel`]: Sinew keeps poles
//! in trees, where Blender drops them). A step solves
//! `Δθ = Jᵀ (J Jᵀ + λ² I)⁻¹ r` (the Gram matrix is small: three rows per goal), and λ adapts as
//! Levenberg–Marquardt's: halved after a step that lowers `|r|²`, multiplied by four (and the
//! step retried) after one that does not.
//!
//! Limits are kept at every step: each bone's new local rotation is clamped to its limit, as in
//! FABRIK (§3.7.2). A clamped bone would otherwise keep pushing into its limit while the step
//! assumes it moved; so the direction the clamp took away is blocked (projected out of that
//! bone's axes) for the following steps, and the other joints take up the rest (the "clamping
//! loop" of Baerlocher & Boulic, for swing cones).

use glam::DVec3;
use nalgebra::{DMatrix, DVector, linalg::Cholesky};

use crate::geometry::{angle_between, from_rotation_vector, renormalize, rotation_vector};
use crate::limits::Swing;
use crate::pose::{Frames, Pose};
use crate::problem::{Problem, RootMode};

/// Levenberg–Marquardt damping at the start, relative to the Gram matrix's largest diagonal.
const DAMPING_START: f64 = 1e-3;
/// Smallest relative damping (keeps the Gram matrix positive definite near singular poses).
const DAMPING_MIN: f64 = 1e-9;
/// Relative damping past which no step lowers the error: a local minimum.
const DAMPING_MAX: f64 = 1e6;
/// The clamp moved a bone by more than this (radians): its direction is blocked.
const CLAMPED: f64 = 1e-9;

/// One unknown: a turn of `bone` about a world axis (`None`: the root's translation along a
/// world axis).
#[derive(Debug, Clone, Copy)]
struct Dof {
    bone: Option<usize>,
    /// For a bone: 0–2 the world axes (projected off the blocked direction), 3 the hinge axis.
    /// For the root's translation: the world axis.
    axis: usize,
}

/// Scratch space and state of a damped-least-squares solve, reused between solves.
#[derive(Debug, Clone, Default)]
pub(crate) struct DlsSteps {
    dofs: Vec<Dof>,
    /// Per bone: the direction a clamp blocked (world, unit), if any.
    blocked: Vec<Option<DVec3>>,
    /// `J` by unknown, as its nonzero entries (a goal's rows move only with the bones on its
    /// path, so most of `J` is zero): unknown `k` moves the three rows from `r` by `v` for each
    /// `(r, v)` in `blocks[block_start[k]..block_start[k + 1]]` (a goal's position rows, and its
    /// orientation rows), and pole row `r` by `d` for each `(r, d)` in
    /// `pole_rows[pole_start[k]..pole_start[k + 1]]`. Rows ascend within each list.
    blocks: Vec<(usize, DVec3)>,
    block_start: Vec<usize>,
    pole_rows: Vec<(usize, f64)>,
    pole_start: Vec<usize>,
    /// Per goal at the current pose: its first residual row, √weight, effector and (for an
    /// orientation goal) the scale of its rotation rows.
    goal_rows: Vec<GoalRows>,
    /// Per tree pole: its swivel at the current pose.
    pole_at: Vec<f64>,
    /// Per unknown: its world axis at the current pose.
    axes: Vec<DVec3>,
    /// `moves[g * bones + b]`: bone `b` is goal `g`'s effector or one of its ancestors.
    moves: Vec<bool>,
    /// Goals whose pole is kept in a tree (see [`pole_swivel`]): one residual row each.
    tree_poles: Vec<usize>,
    gram: DMatrix<f64>,
    rhs: DVector<f64>,
    step: DVector<f64>,
    /// The pose being refined: its frames and residual.
    frames: Frames,
    residual: DVector<f64>,
    /// A step's candidate, evaluated beside them and swapped in when it is accepted (so a
    /// rejected step leaves the pose's frames and residual as they were).
    trial: Pose,
    trial_frames: Frames,
    trial_residual: DVector<f64>,
}

/// Where a goal's rows sit in `J` and what fills them (see [`DlsSteps::fill_jacobian`]).
#[derive(Debug, Clone, Copy)]
struct GoalRows {
    row: usize,
    weight_sqrt: f64,
    effector: DVec3,
    /// `Some(√weight · reach)` for an orientation goal (three more rows).
    orientation: Option<f64>,
}

/// What a damped-least-squares run did.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) struct DlsOutcome {
    /// Steps tried (accepted or not).
    pub iterations: u32,
    /// Whether every goal ended within `tolerance` (and every tree pole within
    /// [`POLE_TOLERANCE`]).
    pub reached: bool,
}

impl DlsSteps {
    /// Refines `pose` (inside every limit; locked bones keep their rotations in it) toward the
    /// goals for at most `max_iterations` steps; `pose` only ever gets better (lower weighted
    /// squared residual). Stops when every goal is within `tolerance`, or at a local
    /// minimum (no step of any damping lowers the error). `fk` is the forward kinematics of
    /// `pose` when the caller has it; [`DlsSteps::frames`] are that of the refined pose.
    pub(crate) fn refine(&mut self, problem: &Problem, pose: &mut Pose, fk: Option<&Frames>, tolerance: f64, max_iterations: u32) -> DlsOutcome {
        let rig = problem.rig();
        self.collect_dofs(problem);
        let m = problem.goals().iter().map(|g| if g.orientation.is_some() { 6 } else { 3 }).sum::<usize>()
            + self.tree_poles.len();
        let n = self.dofs.len();
        self.blocked.clear();
        self.blocked.resize(rig.len(), None);
        if self.residual.len() != m {
            self.residual = DVector::zeros(m);
            self.trial_residual = DVector::zeros(m);
            self.rhs = DVector::zeros(m);
        }
        if self.step.len() != n {
            self.step = DVector::zeros(n);
        }
        let mut error = match fk {
            Some(fk) => {
                self.frames.copy_from(fk);
                residual(problem, &self.tree_poles, &self.frames, &mut self.residual)
            }
            None => evaluate(problem, &self.tree_poles, pose, &mut self.frames, &mut self.residual),
        };
        if n == 0 || m == 0 {
            return DlsOutcome { iterations: 0, reached: self.all_reached(problem, tolerance) };
        }
        let mut damping = DAMPING_START;
        let mut it = 0;
        while it < max_iterations {
            if self.all_reached(problem, tolerance) {
                break;
            }
            it += 1;
            // `self.frames` and `self.residual` are those of `pose`.
            self.fill_jacobian(problem);
            let gram = std::mem::replace(&mut self.gram, DMatrix::zeros(0, 0));
            let mut gram = if gram.shape() == (m, m) { gram } else { DMatrix::zeros(m, m) };
            self.gram_into(m, &mut gram);
            let scale = (0..m).map(|i| gram[(i, i)]).fold(0.0, f64::max);
            if scale <= 0.0 {
                self.gram = gram;
                break;
            }
            for i in 0..m {
                gram[(i, i)] += damping.max(DAMPING_MIN) * scale;
            }
            self.rhs.copy_from(&self.residual);
            let Some(chol) = Cholesky::new(gram) else { break };
            chol.solve_mut(&mut self.rhs);
            self.gram = chol.unpack();
            // Δθ = Jᵀ y, over each unknown's nonzero rows.
            let y = self.rhs.as_slice();
            for k in 0..n {
                let blocks = &self.blocks[self.block_start[k]..self.block_start[k + 1]];
                let poles = &self.pole_rows[self.pole_start[k]..self.pole_start[k + 1]];
                self.step[k] = blocks.iter().map(|&(r, v)| v.dot(DVec3::from_slice(&y[r..r + 3]))).sum::<f64>()
                    + poles.iter().map(|&(r, d)| d * y[r]).sum::<f64>();
            }
            let mut trial = std::mem::take(&mut self.trial);
            // Field by field: the derived `Pose::clone_from` would allocate anew.
            trial.rotations.clone_from(&pose.rotations);
            trial.root_translation = pose.root_translation;
            self.apply_step(problem, pose, &mut trial);
            let trial_error = evaluate(problem, &self.tree_poles, &trial, &mut self.trial_frames, &mut self.trial_residual);
            let better = trial_error < error;
            if better {
                std::mem::swap(pose, &mut trial);
                std::mem::swap(&mut self.frames, &mut self.trial_frames);
                std::mem::swap(&mut self.residual, &mut self.trial_residual);
            }
            self.trial = trial;
            if better {
                let gain = (error - trial_error) / error.max(f64::MIN_POSITIVE);
                error = trial_error;
                damping = (damping * 0.5).max(DAMPING_MIN);
                if gain < 1e-9 {
                    break;
                }
            } else {
                // Rejected: `pose` and its frames and residual stand; damp harder.
                damping *= 4.0;
                if damping > DAMPING_MAX {
                    break;
                }
            }
        }
        DlsOutcome { iterations: it, reached: self.all_reached(problem, tolerance) }
    }

    /// The forward kinematics of the pose the last [`DlsSteps::refine`] left.
    pub(crate) fn frames(&self) -> &Frames {
        &self.frames
    }

    /// The unknowns: every unlocked bone some goal moves (three world axes, or its hinge axis),
    /// then the root's translation when it is free.
    fn collect_dofs(&mut self, problem: &Problem) {
        let rig = problem.rig();
        self.dofs.clear();
        for &b in &problem.topology().active {
            let limit = &rig.bone(b).limit;
            if limit.locked || limit.stiffness >= 1.0 {
                continue;
            }
            match limit.swing {
                Swing::Hinge(_) => self.dofs.push(Dof { bone: Some(b), axis: 3 }),
                _ => self.dofs.extend((0..3).map(|axis| Dof { bone: Some(b), axis })),
            }
        }
        if problem.root() == RootMode::Free && problem.topology().active.first() == Some(&0) {
            self.dofs.extend((0..3).map(|axis| Dof { bone: None, axis }));
        }
        let topo = problem.topology();
        self.tree_poles.clear();
        self.tree_poles.extend((0..problem.goals().len()).filter(|&gi| problem.goals()[gi].pole.is_some() && !topo.is_lone_chain(gi)));
        let bones = rig.len();
        self.moves.clear();
        self.moves.resize(problem.goals().len() * bones, false);
        for (gi, g) in problem.goals().iter().enumerate() {
            let mut b = Some(g.bone);
            while let Some(x) = b {
                self.moves[gi * bones + x] = true;
                b = rig.bone(x).parent;
            }
        }
    }

    /// Every goal within `tolerance`, and every tree pole's swivel within [`POLE_TOLERANCE`].
    fn all_reached(&self, problem: &Problem, tolerance: f64) -> bool {
        problem.goals().iter().all(|g| (self.frames.effector(g.bone, g.use_tail) - g.target).length() <= tolerance)
            && self.tree_poles.iter().all(|&gi| {
                let top = pole_top(problem, gi);
                pole_swivel(problem, gi, self.frames.rotations[top], self.frames.heads[top]).abs() <= POLE_TOLERANCE
            })
    }

    /// The world axis of unknown `dof` at the current frames.
    fn axis(&self, problem: &Problem, dof: Dof) -> DVec3 {
        let Some(b) = dof.bone else { return DVec3::AXES[dof.axis] };
        if dof.axis == 3 {
            let Swing::Hinge(h) = problem.rig().bone(b).limit.swing else { unreachable!("hinge axis of a non-hinge") };
            // The local rotation turns about the hinge axis, which it therefore keeps.
            return self.frames.rotations[b] * h.axis;
        }
        let a = DVec3::AXES[dof.axis];
        match self.blocked[b] {
            Some(v) => a - v * v.dot(a),
            None => a,
        }
    }

    /// `J` at the current frames, by unknown (see `jac`): each goal's effector moves with every
    /// unknown of a bone on its path to the root.
    fn fill_jacobian(&mut self, problem: &Problem) {
        let rig = problem.rig();
        let topo = problem.topology();
        let bones = rig.len();
        self.axes.clear();
        for k in 0..self.dofs.len() {
            let axis = self.axis(problem, self.dofs[k]);
            self.axes.push(axis);
        }
        self.goal_rows.clear();
        let mut row = 0;
        for (gi, g) in problem.goals().iter().enumerate() {
            let weight_sqrt = g.weight.sqrt();
            let orientation = g.orientation.map(|_| weight_sqrt * topo.chain_reach[gi]);
            self.goal_rows.push(GoalRows { row, weight_sqrt, effector: self.frames.effector(g.bone, g.use_tail), orientation });
            row += if orientation.is_some() { 6 } else { 3 };
        }

        self.pole_at.clear();
        for &gi in &self.tree_poles {
            let top = pole_top(problem, gi);
            self.pole_at.push(pole_swivel(problem, gi, self.frames.rotations[top], self.frames.heads[top]));
        }
        self.blocks.clear();
        self.block_start.clear();
        self.pole_rows.clear();
        self.pole_start.clear();
        for (&dof, &axis) in self.dofs.iter().zip(&self.axes) {
            self.block_start.push(self.blocks.len());
            self.pole_start.push(self.pole_rows.len());
            let stiff = dof.bone.map_or(1.0, |b| 1.0 - rig.bone(b).limit.stiffness);
            for (gi, gr) in self.goal_rows.iter().enumerate() {
                let (dp, dr) = match dof.bone {
                    None => (axis, DVec3::ZERO),
                    Some(b) if self.moves[gi * bones + b] => (axis.cross(gr.effector - self.frames.heads[b]) * stiff, axis * stiff),
                    Some(_) => continue,
                };
                self.blocks.push((gr.row, dp * gr.weight_sqrt));
                if let Some(scale) = gr.orientation {
                    self.blocks.push((gr.row + 3, dr * scale));
                }
            }
            // Tree poles: the swivel turns with the chain's top bone and everything above it
            // (which also moves the top's head, and with it the axis); first-order updates, no FK.
            for (p, &gi) in self.tree_poles.iter().enumerate() {
                let g = &problem.goals()[gi];
                let top = pole_top(problem, gi);
                let (rot, head) = (self.frames.rotations[top], self.frames.heads[top]);
                let turned = match dof.bone {
                    None => (rot, head + axis * SWIVEL_STEP),
                    Some(b) if b <= top && self.moves[gi * bones + b] => {
                        let turn = from_rotation_vector(axis * (SWIVEL_STEP * stiff));
                        let pivot = self.frames.heads[b];
                        ((turn * rot).normalize(), pivot + turn * (head - pivot))
                    }
                    Some(_) => continue,
                };
                let scale = g.weight.sqrt() * topo.chain_reach[gi];
                self.pole_rows.push((row + p, (pole_swivel(problem, gi, turned.0, turned.1) - self.pole_at[p]) / SWIVEL_STEP * scale));
            }
        }
        self.block_start.push(self.blocks.len());
        self.pole_start.push(self.pole_rows.len());
    }

    /// `J Jᵀ` into the lower triangle of `gram` (m × m; the Cholesky factorisation reads only
    /// that), as the sum over unknowns of the outer products of their nonzero rows.
    fn gram_into(&self, m: usize, gram: &mut DMatrix<f64>) {
        let g = gram.as_mut_slice();
        g.fill(0.0);
        for k in 0..self.dofs.len() {
            let blocks = &self.blocks[self.block_start[k]..self.block_start[k + 1]];
            let poles = &self.pole_rows[self.pole_start[k]..self.pole_start[k + 1]];
            // Column-major: (i, j) is at i + j·m, j ≤ i. Blocks ascend, and pole rows come after
            // every block's.
            for (a, &(ra, u)) in blocks.iter().enumerate() {
                for &(rb, v) in &blocks[..=a] {
                    for (c, vc) in v.to_array().into_iter().enumerate() {
                        let col = &mut g[(rb + c) * m + ra..(rb + c) * m + ra + 3];
                        col[0] += u.x * vc;
                        col[1] += u.y * vc;
                        col[2] += u.z * vc;
                    }
                }
            }
            for (a, &(ra, d)) in poles.iter().enumerate() {
                for &(rb, v) in blocks {
                    for (c, vc) in v.to_array().into_iter().enumerate() {
                        g[(rb + c) * m + ra] += d * vc;
                    }
                }
                for &(rb, e) in &poles[..=a] {
                    g[rb * m + ra] += d * e;
                }
            }
        }
    }

    /// `trial` ← `pose` turned by `self.step`, each bone clamped to its limit; records the
    /// directions clamps took away in `self.blocked`. `self.frames` are `pose`'s.
    fn apply_step(&mut self, problem: &Problem, pose: &Pose, trial: &mut Pose) {
        let rig = problem.rig();
        let mut turn = DVec3::ZERO;
        let mut k = 0;
        while k < self.dofs.len() {
            let dof = self.dofs[k];
            let Some(b) = dof.bone else {
                // The root's translation, kept in bone 0's rest frame.
                let t = DVec3::new(self.step[k], self.step[k + 1], self.step[k + 2]);
                trial.root_translation = pose.root_translation + rig.bone(0).rest_rotation.conjugate() * t;
                k += 3;
                continue;
            };
            turn += self.axes[k] * self.step[k] * (1.0 - rig.bone(b).limit.stiffness);
            k += 1;
            if self.dofs.get(k).is_some_and(|d| d.bone == Some(b)) {
                continue;
            }
            // All of bone b's unknowns are summed: world turn `turn` about its head. With
            // world = base · local, exp(ω) · world = base · local · exp(world⁻¹ ω).
            let world = self.frames.rotations[b];
            let local = pose.rotations[b];
            let wanted = renormalize(local * from_rotation_vector(world.conjugate() * turn));
            let limit = &rig.bone(b).limit;
            let clamped = limit.clamp(wanted);
            if clamped != wanted && angle_between(clamped, wanted) > CLAMPED {
                // The world direction the clamp removed: base · rotvec(clamped · wanted⁻¹).
                let base = world * local.conjugate();
                self.blocked[b] = (base * rotation_vector((clamped * wanted.conjugate()).normalize())).try_normalize();
            }
            trial.rotations[b] = clamped;
            turn = DVec3::ZERO;
        }
    }
}

/// Forward kinematics of `pose` into `frames` and the residual (rows as `J`'s) into `residual`;
/// returns `|r|²`. `tree_poles` are the goals with a residual row for their pole's swivel.
fn evaluate(problem: &Problem, tree_poles: &[usize], pose: &Pose, frames: &mut Frames, residual: &mut DVector<f64>) -> f64 {
    problem.rig().forward_into(pose, frames);
    self::residual(problem, tree_poles, frames, residual)
}

/// The residual (rows as `J`'s) of the pose whose forward kinematics is `frames`, into
/// `residual`; returns `|r|²`.
fn residual(problem: &Problem, tree_poles: &[usize], frames: &Frames, residual: &mut DVector<f64>) -> f64 {
    let topo = problem.topology();
    let mut row = 0;
    for (gi, g) in problem.goals().iter().enumerate() {
        let w = g.weight.sqrt();
        let d = (g.target - frames.effector(g.bone, g.use_tail)) * w;
        residual.fixed_rows_mut::<3>(row).copy_from_slice(&d.to_array());
        row += 3;
        if let Some(q) = g.orientation {
            let r = rotation_vector((q * frames.rotations[g.bone].conjugate()).normalize()) * (w * topo.chain_reach[gi]);
            residual.fixed_rows_mut::<3>(row).copy_from_slice(&r.to_array());
            row += 3;
        }
    }
    for &gi in tree_poles {
        let top = pole_top(problem, gi);
        let swivel = pole_swivel(problem, gi, frames.rotations[top], frames.heads[top]);
        residual[row] = -swivel * problem.goals()[gi].weight.sqrt() * topo.chain_reach[gi];
        row += 1;
    }
    residual.norm_squared()
}

/// The top bone of goal `gi`'s chain, whose frame a pole turns (see [`pole_swivel`]).
fn pole_top(problem: &Problem, gi: usize) -> usize {
    *problem.topology().moved[gi].last().unwrap_or(&problem.goals()[gi].bone)
}

/// A tree pole is kept when its swivel is within this (radians).
const POLE_TOLERANCE: f64 = 1e-4;

/// The turn (radians) by which a tree pole's swivel is differentiated numerically.
const SWIVEL_STEP: f64 = 1e-7;

/// The swivel of goal `gi`'s chain from its pole, with the chain's top bone at `rot`, `head`:
/// the signed angle, about the axis from `head` to the goal's target, from the pole to the top
/// bone's `X·cos a + Z·sin a` (`a` the pole angle), both seen along that axis. Zero is Sinew's
/// convention for poles in trees (as FABRIK's `keep_tree_poles` turns the chain): the bend plane
/// turns to the pole. Zero when either is along the axis.
fn pole_swivel(problem: &Problem, gi: usize, rot: glam::DQuat, head: DVec3) -> f64 {
    let g = &problem.goals()[gi];
    let Some(pole) = g.pole else { return 0.0 };
    let Some(axis) = (g.target - head).try_normalize() else { return 0.0 };
    let flat = |v: DVec3| (v - axis * v.dot(axis)).try_normalize();
    let (sin, cos) = pole.angle.sin_cos();
    let (Some(side), Some(toward)) = (flat(rot * DVec3::new(cos, 0.0, sin)), flat(pole.target - head)) else {
        return 0.0;
    };
    toward.cross(side).dot(axis).atan2(toward.dot(side))
}
